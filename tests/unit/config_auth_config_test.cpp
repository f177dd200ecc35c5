// The [auth] keys: Open WebUI's JWT secret (at least 32 bytes) and require_jwt (a boolean that
// needs the secret), each mistake one line naming the key.
#include "config/auth_config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "config/server_config.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class AuthConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    const std::string path = scratch_.path() + "/config.toml";
    std::ofstream(path) << text;
    return path;
  }
  testing::ScratchDir scratch_{"agentbox-auth-config"};
};

TEST_F(AuthConfigTest, OffByDefaultAndReadFromTheFile) {
  const auto no_env = [](const char*) -> const char* { return nullptr; };
  ServerConfig none = load_server_config(std::nullopt, no_env);
  EXPECT_EQ(none.auth.openwebui_jwt_secret, "");
  EXPECT_FALSE(none.auth.require_jwt);
  const std::string secret(64, 'a');
  ServerConfig on =
      load_server_config(write("[auth]\nopenwebui_jwt_secret = \"" + secret + "\"\nrequire_jwt = true\n"), no_env);
  EXPECT_EQ(on.auth.openwebui_jwt_secret, secret);
  EXPECT_TRUE(on.auth.require_jwt);
}

TEST_F(AuthConfigTest, MistakesAreOneLineNamingTheKey) {
  EXPECT_THAT(validate_config_file(write("[auth]\nrequire_jwt = true\n")),
              ElementsAre(HasSubstr("auth.require_jwt is true but auth.openwebui_jwt_secret is not set")));
  EXPECT_THAT(validate_config_file(write("[auth]\nopenwebui_jwt_secret = \"short\"\n")),
              ElementsAre(HasSubstr("auth.openwebui_jwt_secret: must be at least 32 bytes")));
  EXPECT_THAT(validate_config_file(write("[auth]\nrequire_jwt = \"yes\"\n")),
              ElementsAre(HasSubstr("auth.require_jwt: must be true or false")));
  EXPECT_THAT(validate_config_file(write("[auth]\nsecret = \"x\"\n")), ElementsAre(HasSubstr("auth.secret")));
  EXPECT_THAT(validate_config_file(write("[auth]\nrequire_jwt = false\n")), IsEmpty());
}

}  // namespace
}  // namespace agentbox
