// authorize(): every kind of route against every kind of credential, without a socket, and the
// signed link's rewrite of the user it acts as.
#include "http/authorize.hpp"

#include <gtest/gtest.h>

#include <string>

namespace agentbox::http {
namespace {

constexpr char kApiKey[] = "api-key-0123456789";
constexpr char kAdminKey[] = "admin-key-0123456789";
constexpr std::int64_t kNow = 1'000'000;

Credentials credentials() {
  return {ApiKeyAuth(kApiKey), ApiKeyAuth(kAdminKey), std::make_shared<SignedLinks>("link-key")};
}

Request with_key(std::string_view key) {
  Request r;
  if (!key.empty()) r.headers.set("Authorization", "Bearer " + std::string(key));
  return r;
}

// A request carrying a link that signs (user, path) until `expires`.
Request with_link(const std::string& user, const std::string& path, std::int64_t expires) {
  Request r;
  r.query = {{"path", path}, {"user_id", user}, {"token", credentials().links->sign(user, path, expires)}};
  return r;
}

const RouteOptions kOrdinary{};
const RouteOptions kAdmin{.admin = true};
const RouteOptions kPublic{.is_public = true};
const RouteOptions kInHandler{.auth_in_handler = true};
const RouteOptions kLinked{.signed_link = true};

unsigned status_of(const AuthDecision& d) { return d.refusal ? static_cast<unsigned>(d.refusal->status) : 0; }

TEST(Authorize, AnOrdinaryRouteTakesTheApiKeyOnly) {
  const Credentials c = credentials();
  Request key = with_key(kApiKey);
  AuthDecision d = authorize(kOrdinary, key, c, kNow);
  EXPECT_TRUE(d.allowed());
  EXPECT_EQ(d.by, AuthDecision::By::api_key);
  EXPECT_TRUE(d.key_accepted());
  EXPECT_TRUE(d.authenticated());

  for (std::string_view bad : {"", "wrong", kAdminKey}) {  // the admin key opens no ordinary route
    Request r = with_key(bad);
    d = authorize(kOrdinary, r, c, kNow);
    EXPECT_EQ(status_of(d), 401u) << bad;
    EXPECT_EQ(d.refusal->body, R"({"detail":"Invalid API key"})");
    EXPECT_EQ(d.refusal->headers[http::field::www_authenticate], "Bearer");
    EXPECT_FALSE(d.authenticated());
  }
  Request basic;
  basic.headers.set("Authorization", std::string("Basic ") + kApiKey);
  EXPECT_EQ(status_of(authorize(kOrdinary, basic, c, kNow)), 401u);
}

TEST(Authorize, AnAdminRouteTakesTheAdminKeyAndTurnsTheApiKeyAwayWith403) {
  const Credentials c = credentials();
  Request admin = with_key(kAdminKey);
  AuthDecision d = authorize(kAdmin, admin, c, kNow);
  EXPECT_TRUE(d.allowed());
  EXPECT_EQ(d.by, AuthDecision::By::admin_key);
  EXPECT_TRUE(d.key_accepted());

  Request api = with_key(kApiKey);
  d = authorize(kAdmin, api, c, kNow);
  EXPECT_EQ(status_of(d), 403u);
  EXPECT_EQ(d.refusal->body, R"({"detail":"This is an admin route: it takes the admin key, not the API key"})");
  EXPECT_FALSE(d.refusal->headers.count(http::field::www_authenticate));
  EXPECT_FALSE(d.authenticated());

  for (std::string_view bad : {"", "wrong"}) {
    Request r = with_key(bad);
    d = authorize(kAdmin, r, c, kNow);
    EXPECT_EQ(status_of(d), 401u);
    EXPECT_EQ(d.refusal->body, R"({"detail":"Invalid admin key"})");
    EXPECT_EQ(d.refusal->headers[http::field::www_authenticate], "Bearer");
  }
  // A signed link is no admin credential.
  Request link = with_link("alice", "/a", kNow + 60);
  EXPECT_EQ(status_of(authorize(RouteOptions{.admin = true, .signed_link = true}, link, c, kNow)), 401u);
}

TEST(Authorize, WithoutAnAdminKeyConfiguredEveryAdminRouteIs401) {
  Credentials c = credentials();
  c.admin_key = ApiKeyAuth("");
  Request empty = with_key("");
  EXPECT_EQ(status_of(authorize(kAdmin, empty, c, kNow)), 401u);
  Request bearer_nothing;
  bearer_nothing.headers.set("Authorization", "Bearer ");
  EXPECT_EQ(status_of(authorize(kAdmin, bearer_nothing, c, kNow)), 401u);
}

TEST(Authorize, PublicAndSelfAuthenticatingRoutesPassWithoutAKeyAndSayWhetherOneCame) {
  const Credentials c = credentials();
  for (const RouteOptions* route : {&kPublic, &kInHandler}) {
    Request none = with_key("");
    AuthDecision d = authorize(*route, none, c, kNow);
    EXPECT_TRUE(d.allowed());
    EXPECT_EQ(d.by, AuthDecision::By::nothing);
    EXPECT_FALSE(d.key_accepted());  // the takeover's handler asks for a key of its own
    EXPECT_FALSE(d.authenticated());

    Request key = with_key(kApiKey);
    d = authorize(*route, key, c, kNow);
    EXPECT_TRUE(d.allowed());
    EXPECT_TRUE(d.key_accepted());
    EXPECT_TRUE(d.authenticated());

    Request wrong = with_key("wrong");
    EXPECT_TRUE(authorize(*route, wrong, c, kNow).allowed());
  }
}

TEST(Authorize, AValidLinkActsAsItsUserWhateverTheHeadersSay) {
  const Credentials c = credentials();
  Request r = with_link("alice", "/home/alice/report.csv", kNow + 60);
  r.headers.set("X-User-Id", "mallory");
  r.headers.set("X-OpenWebUI-User-Id", "mallory");
  r.headers.set("X-Session-Id", "s1");
  r.headers.set("X-OpenWebUI-Chat-Id", "c1");
  r.headers.set("X-Other", "kept");
  AuthDecision d = authorize(kLinked, r, c, kNow);
  ASSERT_TRUE(d.allowed());
  EXPECT_EQ(d.by, AuthDecision::By::signed_link);
  EXPECT_FALSE(d.key_accepted());
  EXPECT_TRUE(d.authenticated());
  EXPECT_EQ(r.header("X-User-Id"), "alice");
  EXPECT_EQ(r.headers.count("X-User-Id"), 1u);
  for (const char* gone : {"X-OpenWebUI-User-Id", "X-Session-Id", "X-OpenWebUI-Chat-Id"})
    EXPECT_FALSE(r.header(gone)) << gone;
  EXPECT_EQ(r.header("X-Other"), "kept");
}

TEST(Authorize, ALinkThatDoesNotSignThisUserPathAndTimeIs401AndRewritesNothing) {
  const Credentials c = credentials();
  std::vector<Request> bad;
  bad.push_back(with_link("alice", "/a", kNow));  // expired at now
  bad.push_back(with_link("alice", "/a", kNow + 60));
  bad.back().query[0].second = "/b";  // another path
  bad.push_back(with_link("alice", "/a", kNow + 60));
  bad.back().query[1].second = "bob";             // another user
  bad.push_back(with_link("", "/a", kNow + 60));  // nobody
  bad.push_back(with_link("alice", "/a", kNow + 60));
  bad.back().query.pop_back();  // no token
  for (Request& r : bad) {
    r.headers.set("X-User-Id", "mallory");
    AuthDecision d = authorize(kLinked, r, c, kNow);
    EXPECT_EQ(status_of(d), 401u);
    EXPECT_EQ(d.refusal->body, R"({"detail":"Invalid API key"})");
    EXPECT_EQ(r.header("X-User-Id"), "mallory");
  }
  // A valid link on a route that does not take links, or with no link checker configured.
  Request r = with_link("alice", "/a", kNow + 60);
  EXPECT_EQ(status_of(authorize(kOrdinary, r, c, kNow)), 401u);
  Credentials no_links = credentials();
  no_links.links = nullptr;
  EXPECT_EQ(status_of(authorize(kLinked, r, no_links, kNow)), 401u);
  EXPECT_FALSE(r.header("X-User-Id"));
}

TEST(Authorize, TheApiKeyComesBeforeALinkAndKeepsTheRequestsOwnUser) {
  const Credentials c = credentials();
  Request r = with_link("alice", "/a", kNow + 60);
  r.headers.set("Authorization", std::string("Bearer ") + kApiKey);
  r.headers.set("X-User-Id", "carol");
  AuthDecision d = authorize(kLinked, r, c, kNow);
  EXPECT_EQ(d.by, AuthDecision::By::api_key);
  EXPECT_EQ(r.header("X-User-Id"), "carol");
}

}  // namespace
}  // namespace agentbox::http
