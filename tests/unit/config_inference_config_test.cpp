// The inference gateway's keys ([inference], [inference.anthropic]) and where its credential
// comes from.
#include "config/inference_config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "config/server_config.hpp"
#include "support/scratch_dir.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class InferenceConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    std::string path = scratch_.path() + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  ServerConfig load(const std::string& toml) {
    return load_server_config(write("config.toml", toml), [](const char*) -> const char* { return nullptr; });
  }
  std::function<const char*(const char*)> env(std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
  std::string error_of(const std::string& toml) {
    try {
      load(toml);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  testing::ScratchDir scratch_{"agentbox-inference-config"};
};

TEST_F(InferenceConfigTest, DefaultsAreAnthropicOverTlsWithNoCredential) {
  ServerConfig config = load_server_config(std::nullopt, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(config.inference.port, 3129);
  EXPECT_FALSE(config.inference.anthropic.configured);
  EXPECT_EQ(config.inference.anthropic.upstream.to_string(), "https://api.anthropic.com");
  EXPECT_EQ(load_anthropic_credential(config.inference, env({})), std::nullopt);
}

TEST_F(InferenceConfigTest, ReadsTheDocumentedKeys) {
  ServerConfig config = load(R"(
[inference]
port = 4000
connections = 8
connect_timeout = 3
idle_timeout = 90
request_memory = "8MiB"
[inference.anthropic]
upstream = "https://gateway.example:8443/anthropic/"
key_file = "/etc/agentbox/anthropic.key"
ca_file = "/etc/agentbox/ca.pem"
daily_tokens = 1000000
context_tokens = 200000
)");
  EXPECT_EQ(config.inference.port, 4000);
  EXPECT_EQ(config.inference.connections, 8u);
  EXPECT_EQ(config.inference.connect_timeout.count(), 3);
  EXPECT_EQ(config.inference.idle_timeout.count(), 90);
  EXPECT_EQ(config.inference.request_memory, 8u << 20);
  const auto& a = config.inference.anthropic;
  EXPECT_TRUE(a.configured);
  EXPECT_TRUE(a.upstream.tls);
  EXPECT_EQ(a.upstream.host, "gateway.example");
  EXPECT_EQ(a.upstream.port, 8443);
  EXPECT_EQ(a.upstream.base_path, "/anthropic");
  EXPECT_EQ(a.upstream.authority(), "gateway.example:8443");
  EXPECT_EQ(a.key_file, "/etc/agentbox/anthropic.key");
  EXPECT_EQ(a.ca_file, "/etc/agentbox/ca.pem");
  EXPECT_EQ(a.daily_tokens, 1000000u);
  EXPECT_EQ(a.context_tokens, 200000u);
}

TEST_F(InferenceConfigTest, BudgetCheckDefaults) {
  ServerConfig config = load("");
  EXPECT_EQ(config.inference.request_memory, 32u << 20);
  EXPECT_EQ(config.inference.anthropic.context_tokens, 1000000u);
}

TEST_F(InferenceConfigTest, PlainHttpOnlyToLoopback) {
  EXPECT_EQ(load("[inference.anthropic]\nupstream = \"http://127.0.0.1:9000\"\n").inference.anthropic.upstream.port,
            9000);
  EXPECT_EQ(load("[inference.anthropic]\nupstream = \"http://[::1]:9000\"\n").inference.anthropic.upstream.host, "::1");
  EXPECT_THAT(error_of("[inference.anthropic]\nupstream = \"http://api.anthropic.com\"\n"),
              HasSubstr("plain http:// only to a loopback address"));
  EXPECT_THAT(error_of("[inference.anthropic]\nupstream = \"http://10.0.0.1\"\n"),
              HasSubstr("plain http:// only to a loopback address"));
  EXPECT_THAT(error_of("[inference.anthropic]\nupstream = \"ftp://x\"\n"), HasSubstr("scheme must be https"));
  EXPECT_THAT(error_of("[inference.anthropic]\nupstream = \"https://u:p@api.anthropic.com\"\n"),
              HasSubstr("no user or password"));
  EXPECT_THAT(error_of("[inference.anthropic]\nupstream = \"api.anthropic.com\"\n"), HasSubstr("not an absolute URL"));
}

TEST_F(InferenceConfigTest, BadValuesNameTheirKey) {
  EXPECT_THAT(error_of("[inference.anthropic]\ndaily_tokens = -1\n"), HasSubstr("inference.anthropic.daily_tokens"));
  EXPECT_THAT(error_of("[inference.anthropic]\ncontext_tokens = 0\n"), HasSubstr("inference.anthropic.context_tokens"));
  EXPECT_THAT(error_of("[inference]\nrequest_memory = \"1KiB\"\n"), HasSubstr("inference.request_memory: at least"));
  EXPECT_THAT(error_of("[inference]\nrequest_memory = \"lots\"\n"), HasSubstr("inference.request_memory"));
  EXPECT_THAT(error_of("[inference.anthropic]\nkey = \"x\"\n"), HasSubstr("unknown key \"inference.anthropic.key\""));
  EXPECT_THAT(error_of("[inference]\nport = 3128\n"), HasSubstr("inference.port and egress.port are both 3128"));
}

TEST_F(InferenceConfigTest, CredentialFromAKeyFileOwnedAndReadableByUsOnly) {
  std::string key = write("anthropic.key", "sk-ant-api03-abcdef\n");
  ServerConfig config = load("[inference.anthropic]\nkey_file = \"" + key + "\"\n");
  std::optional<net::Credential> c = load_anthropic_credential(config.inference, env({}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, net::Credential::Kind::api_key);
  EXPECT_EQ(c->secret, "sk-ant-api03-abcdef");

  ::chmod(key.c_str(), 0644);
  try {
    load_anthropic_credential(config.inference, env({}));
    FAIL() << "a key file others can read was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("readable by others"));
    EXPECT_THAT(e.what(), Not(HasSubstr("sk-ant-api03")));
  }
}

TEST_F(InferenceConfigTest, AnOAuthTokenIsRecognised) {
  std::string key = write("token", "sk-ant-oat01-xyz");
  ServerConfig config = load("[inference.anthropic]\nkey_file = \"" + key + "\"\n");
  EXPECT_EQ(load_anthropic_credential(config.inference, env({}))->kind, net::Credential::Kind::oauth_token);
}

TEST_F(InferenceConfigTest, CredentialFromTheEnvironmentTurnsTheGatewayOnWithDefaults) {
  ServerConfig config = load_server_config(std::nullopt, [](const char*) -> const char* { return nullptr; });
  auto c = load_anthropic_credential(config.inference, env({{"AGENTBOX_ANTHROPIC_API_KEY", "sk-ant-api03-env"}}));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, net::Credential::Kind::api_key);
  EXPECT_EQ(c->secret, "sk-ant-api03-env");
  auto t = load_anthropic_credential(config.inference, env({{"AGENTBOX_ANTHROPIC_OAUTH_TOKEN", "tok"}}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind, net::Credential::Kind::oauth_token);
}

TEST_F(InferenceConfigTest, AGatewayConfiguredWithoutCredentialIsAnError) {
  ServerConfig config = load("[inference.anthropic]\ndaily_tokens = 5\n");
  try {
    load_anthropic_credential(config.inference, env({}));
    FAIL() << "no credential was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no credential"));
  }
}

TEST_F(InferenceConfigTest, ACredentialWithSpacesInsideIsRefusedWithoutEchoingIt) {
  std::string key = write("anthropic.key", "sk-ant-api03 secretpart\n");
  ServerConfig config = load("[inference.anthropic]\nkey_file = \"" + key + "\"\n");
  try {
    load_anthropic_credential(config.inference, env({}));
    FAIL() << "a key with a space was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("space or a control character"));
    EXPECT_THAT(e.what(), Not(HasSubstr("secretpart")));
  }
}

}  // namespace
}  // namespace agentbox
