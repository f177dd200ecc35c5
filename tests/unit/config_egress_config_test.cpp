// The egress keys of the server config: [policy.default], [policy.users."NAME"], [hosts].
#include "config/egress_config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "config/server_config.hpp"
#include "support/scratch_dir.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class EgressConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::string path = scratch_.path() + "/config.toml";
    std::ofstream(path) << text;
    return path;
  }
  testing::ScratchDir scratch_{"agentbox-egress-config"};
};

TEST_F(EgressConfigTest, ByDefaultNothingIsAllowed) {
  ServerConfig config = load_server_config(std::nullopt, [](const char*) -> const char* { return nullptr; });
  EXPECT_FALSE(config.egress.default_policy.allows_anything());
  EXPECT_TRUE(config.egress.users.empty());
  EXPECT_TRUE(config.egress.hosts.empty());
}

TEST_F(EgressConfigTest, ReadsTheDocumentedExample) {
  std::string path = write(R"(
[policy.default]
allow = ["registry.npmjs.org", "*.pypi.org", "github.com:443"]
deny = ["*.internal"]
allow_addresses = ["127.0.0.1/32", "fd00::/8"]
[policy.users."alice"]
allow = ["huggingface.co"]
[policy.users."bob.smith@example.com"]
deny = ["github.com"]
[hosts]
"bait.test" = "127.0.0.1"
"Six.Test." = "::1"
)");
  ServerConfig config;
  apply_config_file(config, path);
  const net::EgressConfig& e = config.egress;
  ASSERT_EQ(e.default_policy.allow.size(), 3u);
  EXPECT_EQ(e.default_policy.allow[2].to_string(), "github.com:443");
  ASSERT_EQ(e.default_policy.deny.size(), 1u);
  ASSERT_EQ(e.default_policy.allow_addresses.size(), 2u);
  EXPECT_EQ(e.default_policy.allow_addresses[1].to_string(), "fd00::/8");
  ASSERT_TRUE(e.users.contains("alice"));
  ASSERT_TRUE(e.users.contains("bob.smith@example.com"));  // a dotted name stays one user
  EXPECT_TRUE(net::check_name(e.policy_for("alice"), "huggingface.co", 443).allowed);
  EXPECT_FALSE(net::check_name(e.policy_for("bob.smith@example.com"), "github.com", 443).allowed);
  EXPECT_FALSE(net::check_name(e.policy_for("carol"), "huggingface.co", 443).allowed);
  EXPECT_EQ(e.hosts.at("bait.test").to_string(), "127.0.0.1");
  EXPECT_EQ(e.hosts.at("six.test").to_string(), "::1");  // names are kept normalized
}

TEST_F(EgressConfigTest, EveryBadRuleIsNamedWithItsLine) {
  std::string path = write(R"([policy.default]
allow = ["github.com:0"]
deny = "x.com"
allow_addresses = ["10.0.0.1/8"]
colour = "red"
[policy.users."alice"]
allow = ["ok.com"]
alow = ["typo.com"]
[hosts]
"bait.test" = "not-an-address"
"10.0.0.1" = "127.0.0.1"
)");
  std::vector<std::string> errors = validate_config_file(path);
  ASSERT_EQ(errors.size(), 7u) << ::testing::PrintToString(errors);
  EXPECT_THAT(errors[0], HasSubstr("policy.default.allow: \"github.com:0\" is not a host rule"));
  EXPECT_THAT(errors[0], HasSubstr("(line 2)"));
  EXPECT_THAT(errors[1], HasSubstr("policy.default.deny: expected an array of strings"));
  EXPECT_THAT(errors[2], HasSubstr("did you mean 10.0.0.0/8"));
  EXPECT_THAT(errors[3], HasSubstr("unknown key \"policy.default.colour\" (line 5)"));
  EXPECT_THAT(errors[4], HasSubstr("policy.users.alice: alow: unknown key \"alow\""));
  EXPECT_THAT(errors[5], HasSubstr("hosts.bait.test: \"not-an-address\" is not an IP address (line 10)"));
  EXPECT_THAT(errors[6], HasSubstr("hosts.10.0.0.1: \"10.0.0.1\" is not a host name (line 11)"));
}

TEST_F(EgressConfigTest, AnUnknownKeyUnderPolicyIsAnError) {
  std::vector<std::string> errors = validate_config_file(write("[policy]\nextra = 1\n"));
  EXPECT_THAT(errors, ElementsAre(HasSubstr("unknown key \"policy.extra\" (line 2)")));
  EXPECT_THAT(validate_config_file(write("[policy.default]\nallow = []\n")), IsEmpty());
}

}  // namespace
}  // namespace agentbox
