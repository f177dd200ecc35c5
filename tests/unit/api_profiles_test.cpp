// The profile of a request under /p/{profile}: what is refused and with which words, and the box
// limits GET /usage reports under it.
#include "api/profiles.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/profile_table.hpp"

namespace agentbox::api {
namespace {

ProfileConfig two_profiles() {
  ProfileConfig c;
  c.profiles["open"];
  Profile team;
  team.users = std::vector<std::string>{"alice"};
  team.memory_bytes = 256ull << 20;
  team.isolation = Profile::Isolation::context;
  c.profiles["team"] = team;
  return c;
}

http::Request request(std::string scope, std::string user = {}) {
  http::Request req;
  req.scope = std::move(scope);
  if (!user.empty()) req.headers.set("X-User-Id", user);
  return req;
}

std::string detail(const std::optional<http::Response>& r) {
  return r ? nlohmann::json::parse(r->body)["detail"].get<std::string>() : "";
}

TEST(ApiProfiles, AnUnknownProfileNamesThoseTheCallerMayUse) {
  const ProfileConfig c = two_profiles();
  auto r = refuse_profile(c, request("nope", "alice"), {}, true);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, http::status::not_found);
  EXPECT_EQ(detail(r), "Unknown profile 'nope': the profiles you may use are 'open', 'team'");
  EXPECT_EQ(detail(refuse_profile(c, request("nope", "carol"), {}, true)),
            "Unknown profile 'nope': the profiles you may use are 'open'");
  // Not authenticated: a claimed user learns nothing more.
  EXPECT_EQ(detail(refuse_profile(c, request("nope", "alice"), {.is_public = true}, false)),
            "Unknown profile 'nope': the profiles you may use are 'open'");
  EXPECT_EQ(detail(refuse_profile(ProfileConfig{}, request("nope", "alice"), {}, true)),
            "Unknown profile 'nope': no profile is open to you");
}

TEST(ApiProfiles, AProfileLimitedToSomeUsersRefusesOthers) {
  const ProfileConfig c = two_profiles();
  EXPECT_FALSE(refuse_profile(c, request("team", "alice"), {}, true));
  EXPECT_FALSE(refuse_profile(c, request("open", "carol"), {}, true));
  auto r = refuse_profile(c, request("team", "carol"), {}, true);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, http::status::forbidden);
  EXPECT_EQ(detail(r), "Profile 'team' is not open to user 'carol'");
  // Naming nobody is no way round it, except where no user is needed at all.
  EXPECT_EQ(refuse_profile(c, request("team"), {}, true)->status, http::status::forbidden);
  EXPECT_FALSE(refuse_profile(c, request("team"), {.is_public = true}, false));
  // A WebSocket that authenticates in its first message names its user there.
  EXPECT_FALSE(refuse_profile(c, request("team"), {.auth_in_handler = true}, false));
  EXPECT_TRUE(refuse_profile(c, request("team", "carol"), {.auth_in_handler = true}, false));
}

TEST(ApiProfiles, TheBoxReportedIsTheProfilesOrTheDefault) {
  ProfileTable table(two_profiles());
  Limits base;
  base.memory_bytes = 1ull << 30;
  base.cpu_millicores = 0;  // no limit: null
  nlohmann::json team = profile_box_json(&table, base, std::chrono::seconds(900), request("team", "alice"));
  EXPECT_EQ(team["profile"], "team");
  EXPECT_EQ(team["isolation"], "context");
  EXPECT_EQ(team["memory"], 256ull << 20);
  EXPECT_TRUE(team["cpu"].is_null());
  nlohmann::json plain = profile_box_json(&table, base, std::chrono::seconds(900), request("", "alice"));
  EXPECT_TRUE(plain["profile"].is_null());
  EXPECT_EQ(plain["isolation"], "user");
  EXPECT_EQ(plain["memory"], 1ull << 30);
  EXPECT_EQ(plain["idle_timeout"], 900);
  // A reload takes effect for the next request.
  table.set(ProfileConfig{});
  EXPECT_TRUE(profile_box_json(&table, base, std::chrono::seconds(900), request("team"))["profile"].is_null());
}

}  // namespace
}  // namespace agentbox::api
