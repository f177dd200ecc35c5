// [profiles.NAME]: every key read, the default box changed only where a profile says, and each
// bad key, type or value refused in a line naming the file, the key and its line.
#include "config/profile_config.hpp"

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

class ProfileConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& toml) {
    std::string path = scratch_.path() + "/config.toml";
    std::ofstream(path) << toml;
    return path;
  }
  ServerConfig load(const std::string& toml) {
    return load_server_config(write(toml), [](const char*) -> const char* { return nullptr; });
  }
  // The one error the file gives.
  std::string error_of(const std::string& toml) {
    std::vector<std::string> errors = validate_config_file(write(toml));
    EXPECT_EQ(errors.size(), 1u) << toml;
    return errors.empty() ? "" : errors.front();
  }
  testing::ScratchDir scratch_{"agentbox-profile-config"};
};

TEST_F(ProfileConfigTest, NoProfilesByDefault) {
  ServerConfig c = load_server_config(std::nullopt, [](const char*) -> const char* { return nullptr; });
  EXPECT_TRUE(c.profiles.profiles.empty());
  EXPECT_EQ(c.profiles.find("build"), nullptr);
}

TEST_F(ProfileConfigTest, ReadsEveryKey) {
  ServerConfig c = load(
      "[profiles.build]\n"
      "memory = \"8G\"\ncpu = \"1.5\"\npids = 300\ntmp = \"1G\"\nidle_timeout = 60\n"
      "allow = [\"*.crates.io\"]\ndeny = [\"evil.crates.io\"]\nallow_addresses = [\"10.1.0.0/16\"]\n"
      "binds = [\"/usr/share:/opt/share\"]\n"
      "isolation = \"context\"\nusers = [\"alice\", \"bob\"]\nkeep_days = 14\nreset = \"@weekly\"\n");
  const Profile* p = c.profiles.find("build");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->memory_bytes, 8ull << 30);
  EXPECT_EQ(p->cpu_millicores, 1500u);
  EXPECT_EQ(p->pids, 300u);
  EXPECT_EQ(p->tmp_bytes, 1ull << 30);
  EXPECT_EQ(p->idle_timeout, std::chrono::seconds(60));
  ASSERT_EQ(p->egress.allow.size(), 1u);
  EXPECT_EQ(p->egress.allow[0].to_string(), "*.crates.io");
  ASSERT_EQ(p->egress.deny.size(), 1u);
  EXPECT_EQ(p->egress.allow_addresses.size(), 1u);
  ASSERT_EQ(p->binds.size(), 1u);
  EXPECT_EQ(p->binds[0].source, "/usr/share");
  EXPECT_EQ(p->binds[0].target, "/opt/share");
  EXPECT_FALSE(p->binds[0].writable);
  EXPECT_EQ(p->isolation, Profile::Isolation::context);
  EXPECT_EQ(p->keep_days, 14u);
  EXPECT_EQ(p->reset, std::chrono::hours(24 * 7));
  EXPECT_TRUE(p->admits("alice"));
  EXPECT_FALSE(p->admits("carol"));
}

TEST_F(ProfileConfigTest, AnEmptyProfileIsTheDefaultBoxUnderAName) {
  ServerConfig c = load("[box]\nmemory = \"3G\"\n[profiles.plain]\n[profiles.small]\nmemory = \"256M\"\n");
  const Profile* plain = c.profiles.find("plain");
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->isolation, Profile::Isolation::user);
  EXPECT_TRUE(plain->admits("anyone"));
  EXPECT_EQ(plain->limits(c.box).memory_bytes, 3ull << 30);
  EXPECT_EQ(plain->idle_timeout_or(c.accounts.idle_timeout), c.accounts.idle_timeout);
  // Only what a profile sets changes.
  Limits small = c.profiles.find("small")->limits(c.box);
  EXPECT_EQ(small.memory_bytes, 256ull << 20);
  EXPECT_EQ(small.pids, c.box.pids);
  EXPECT_EQ(small.cpu_millicores, c.box.cpu_millicores);
  EXPECT_EQ(small.tmp_bytes, c.box.tmp_bytes);
}

TEST_F(ProfileConfigTest, NamesForListOnlyWhatTheUserMayUse) {
  ServerConfig c = load("[profiles.team]\nusers = [\"alice\"]\n[profiles.open]\n[profiles.b]\n");
  EXPECT_THAT(c.profiles.names_for("alice"), ElementsAre("b", "open", "team"));
  EXPECT_THAT(c.profiles.names_for("carol"), ElementsAre("b", "open"));
}

TEST_F(ProfileConfigTest, AProfilesDenyBeatsAUsersAllow) {
  ServerConfig c = load(
      "[policy.default]\nallow = [\"pypi.org\"]\n[policy.users.alice]\nallow = [\"evil.test\"]\n"
      "[profiles.locked]\ndeny = [\"evil.test\"]\nallow = [\"crates.io\"]\n");
  const net::EgressPolicy policy = c.egress.policy_for("alice").with(c.profiles.find("locked")->egress);
  EXPECT_FALSE(net::check_name(policy, "evil.test", 443).allowed);
  EXPECT_TRUE(net::check_name(policy, "crates.io", 443).allowed);
  EXPECT_TRUE(net::check_name(policy, "pypi.org", 443).allowed);
  // The control: without the profile the user's allow stands.
  EXPECT_TRUE(net::check_name(c.egress.policy_for("alice"), "evil.test", 443).allowed);
}

TEST_F(ProfileConfigTest, EachBadKeyTypeOrValueNamesFileKeyAndLine) {
  struct Case {
    std::string toml, says;
  };
  for (const Case& bad : std::vector<Case>{
           {"[profiles.x]\nmemroy = \"1G\"\n", "unknown key \"profiles.x.memroy\" (line 2)"},
           {"[profiles.x]\nmemory = 5.5\n", "profiles.x.memory: expected a size"},
           {"[profiles.x]\ncpu = \"0\"\n", "profiles.x.cpu"},
           {"[profiles.x]\npids = 0\n", "profiles.x.pids: must be between 1"},
           {"[profiles.x]\nidle_timeout = \"1h\"\n", "profiles.x.idle_timeout: expected an integer"},
           {"[profiles.x]\n\nisolation = \"chat\"\n",
            "profiles.x.isolation: expected \"user\" or \"context\", not \"chat\" (line 3)"},
           {"[profiles.x]\nusers = []\n", "profiles.x.users: an empty list admits nobody"},
           {"[profiles.x]\nusers = \"alice\"\n", "profiles.x.users: expected an array of strings"},
           {"[profiles.x]\nisolation = \"context\"\nkeep_days = 0\n", "profiles.x.keep_days: must be between 1"},
           {"[profiles.x]\nisolation = \"context\"\nreset = \"daily\"\n", "profiles.x.reset: expected \"@hourly\""},
           {"[profiles.x]\nallow = [\"http://x\"]\n", "profiles.x.allow"},
           {"[profiles.x]\nallow_addresses = [\"10.0.0.0/33\"]\n", "profiles.x.allow_addresses"},
           {"[profiles.x]\nbinds = [\"relative\"]\n", "profiles.x.binds: relative: source must be an absolute path"},
           {"[profiles.x]\nbinds = [\"~/src\"]\n", "profiles.x.binds: \"~/src\": a bind's source must be an absolute"},
           {"[profiles.x]\nbinds = [\"/nonexistent-agentbox-src\"]\n", "profiles.x.binds: /nonexistent-agentbox-src"},
           {"[profiles.x]\nbinds = [\"/usr:/tmp/usr\"]\n", "would cover the box's own /tmp"},
           {"[profiles.x]\nbinds = [\"/usr:/home\"]\n", "would cover the box's own /home"},
           {"[profiles.x]\nbinds = [\"/usr:/agentbox\"]\n", "would cover the box's own /agentbox"},
           {"[profiles.x]\nkeep_days = 3\n", "profiles.x: keep_days and reset are about the workspaces"},
           {"profiles = 3\n", "profiles: expected a table"},
           {"[profiles]\nx = 3\n", "profiles.x: expected a table, not an integer"},
           {"[profiles.x.limits]\nmemory = \"1G\"\n", "profiles.x.limits: expected flat keys"},
           {"[profiles.\"a b\"]\n", "profiles.a b: a profile's name is 1-64 letters"},
           {"[profiles.\"a.b\"]\nmemory = \"1G\"\n", "expected flat keys in a table [profiles.NAME]"},
       }) {
    std::string error = error_of(bad.toml);
    EXPECT_THAT(error, HasSubstr("config.toml: ")) << bad.toml;
    EXPECT_THAT(error, HasSubstr(bad.says)) << bad.toml;
    EXPECT_THAT(error, HasSubstr("(line ")) << bad.toml;
  }
}

TEST_F(ProfileConfigTest, ProfileNamesAreWhatAUrlSegmentCarries) {
  EXPECT_TRUE(valid_profile_name("build"));
  EXPECT_TRUE(valid_profile_name("Team_2-x"));
  EXPECT_TRUE(valid_profile_name(std::string(64, 'a')));
  EXPECT_FALSE(valid_profile_name(""));
  EXPECT_FALSE(valid_profile_name(std::string(65, 'a')));
  for (const char* bad : {"a b", "a/b", "a.b", "..", "%2e", "é"}) EXPECT_FALSE(valid_profile_name(bad)) << bad;
}

}  // namespace
}  // namespace agentbox
