// authorize() and who the caller is (issue 33): a user's key acts as its user whatever the
// request names, and a request naming someone else is 403; a revoked key is nothing; Open
// WebUI's signed user with the shared key; require_jwt refusing the shared key alone.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "http/authorize.hpp"

namespace agentbox::http {
namespace {

constexpr char kApiKey[] = "api-key-0123456789";
constexpr char kAdminKey[] = "admin-key-0123456789";
constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";
constexpr std::int64_t kNow = 1'800'000'000;

const RouteOptions kOrdinary{};
const RouteOptions kAdmin{.admin = true};
const RouteOptions kPublic{.is_public = true};
const RouteOptions kInHandler{.auth_in_handler = true};

struct Fixture {
  std::shared_ptr<UserKeys> keys = std::make_shared<UserKeys>();
  UserKeys::Minted alice = UserKeys::mint();
  std::shared_ptr<OpenWebuiJwt> jwt = std::make_shared<OpenWebuiJwt>(kSecret);
  Credentials credentials{ApiKeyAuth(kApiKey), ApiKeyAuth(kAdminKey), nullptr, keys, jwt};
  Fixture() { keys->add(alice.id, "alice", alice.digest); }
};

Request with_key(std::string_view key) {
  Request r;
  r.headers.set("Authorization", "Bearer " + std::string(key));
  return r;
}

std::string token(const std::string& sub, std::int64_t exp = kNow + 300) {
  return OpenWebuiJwt(kSecret).sign(
      nlohmann::json{{"sub", sub}, {"iss", "open-webui"}, {"iat", kNow}, {"exp", exp}}.dump());
}

unsigned status_of(const AuthDecision& d) { return d.refusal ? static_cast<unsigned>(d.refusal->status) : 0; }

TEST(AuthorizeCallers, AUserKeyActsAsItsUserWithoutNamingIt) {
  Fixture f;
  Request r = with_key(f.alice.key);
  AuthDecision d = authorize(kOrdinary, r, f.credentials, kNow);
  EXPECT_TRUE(d.allowed());
  EXPECT_EQ(d.by, AuthDecision::By::user_key);
  EXPECT_TRUE(d.key_accepted());
  EXPECT_EQ(r.header("X-User-Id"), "alice");
  // Naming its own user, by either header or ?user_id=, is fine.
  Request own = with_key(f.alice.key);
  own.headers.set("X-OpenWebUI-User-Id", "alice");
  own.query = {{"user_id", "alice"}};
  EXPECT_TRUE(authorize(kOrdinary, own, f.credentials, kNow).allowed());
  EXPECT_EQ(own.header("X-User-Id"), "alice");
  EXPECT_FALSE(own.header("X-OpenWebUI-User-Id"));
}

TEST(AuthorizeCallers, AUserKeyNamingAnotherUserIs403) {
  Fixture f;
  for (int how = 0; how < 4; ++how) {
    Request r = with_key(f.alice.key);
    if (how == 0) r.headers.set("X-User-Id", "bob");
    if (how == 1) r.headers.set("X-OpenWebUI-User-Id", "bob");
    if (how == 2) r.query = {{"user_id", "bob"}};
    if (how == 3) {  // alice, then bob: a proxy that appends must not let the client choose
      r.headers.insert("X-User-Id", "alice");
      r.headers.insert("X-User-Id", "bob");
    }
    AuthDecision d = authorize(kOrdinary, r, f.credentials, kNow);
    EXPECT_EQ(status_of(d), 403u) << how;
    EXPECT_EQ(d.refusal->body, R"({"detail":"This API key belongs to another user than the one the request names"})");
  }
  // Control: the shared key may name anyone.
  Request shared = with_key(kApiKey);
  shared.headers.set("X-User-Id", "bob");
  EXPECT_TRUE(authorize(kOrdinary, shared, f.credentials, kNow).allowed());
  EXPECT_EQ(shared.header("X-User-Id"), "bob");
}

TEST(AuthorizeCallers, ARevokedOrForgedUserKeyIs401AndOpensNoAdminRoute) {
  Fixture f;
  Request r = with_key(f.alice.key);
  ASSERT_TRUE(authorize(kOrdinary, r, f.credentials, kNow).allowed());
  f.keys->remove(f.alice.id);
  Request again = with_key(f.alice.key);
  AuthDecision d = authorize(kOrdinary, again, f.credentials, kNow);
  EXPECT_EQ(status_of(d), 401u);
  EXPECT_EQ(d.refusal->body, R"({"detail":"Invalid API key"})");
  EXPECT_FALSE(again.header("X-User-Id"));
  // A revoked key on a public route counts as nothing: the route still answers.
  Request pub = with_key(f.alice.key);
  EXPECT_TRUE(authorize(kPublic, pub, f.credentials, kNow).allowed());
  // A live user key is no admin key.
  Fixture g;
  Request admin = with_key(g.alice.key);
  EXPECT_EQ(status_of(authorize(kAdmin, admin, g.credentials, kNow)), 403u);
  // On a route whose handler checks (the terminal WebSocket) a live key names its user.
  Request ws = with_key(g.alice.key);
  d = authorize(kInHandler, ws, g.credentials, kNow);
  EXPECT_TRUE(d.key_accepted());
  EXPECT_EQ(ws.header("X-User-Id"), "alice");
}

TEST(AuthorizeCallers, TheSharedKeyWithOpenWebuisTokenActsAsItsUser) {
  Fixture f;
  Request r = with_key(kApiKey);
  r.headers.set("X-OpenWebUI-User-Jwt", token("owui-1"));
  AuthDecision d = authorize(kOrdinary, r, f.credentials, kNow);
  EXPECT_TRUE(d.allowed());
  EXPECT_EQ(r.header("X-User-Id"), "owui-1");
  // Naming the same user is fine; another is 403.
  Request same = with_key(kApiKey);
  same.headers.set("X-OpenWebUI-User-Jwt", token("owui-1"));
  same.headers.set("X-User-Id", "owui-1");
  EXPECT_TRUE(authorize(kOrdinary, same, f.credentials, kNow).allowed());
  Request other = with_key(kApiKey);
  other.headers.set("X-OpenWebUI-User-Jwt", token("owui-1"));
  other.headers.set("X-User-Id", "owui-2");
  d = authorize(kOrdinary, other, f.credentials, kNow);
  EXPECT_EQ(status_of(d), 403u);
  EXPECT_EQ(other.header("X-User-Id"), "owui-2");
}

TEST(AuthorizeCallers, ABadTokenIs401NamingTheCheck) {
  Fixture f;
  const std::string none = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4IiwiaXNzIjoib3Blbi13ZWJ1aSIsImV4cCI6OTk5OTk5OTk5OX0.";
  const std::pair<std::string, std::string> cases[] = {
      {token("owui-1", kNow - 1), "the token has expired"},
      {none, "the token is not signed with HS256"},
      {OpenWebuiJwt("another-secret-of-thirty-two-bytes!").sign(R"({"sub":"x","iss":"open-webui","exp":1900000000})"),
       "the token's signature is not valid"},
      {OpenWebuiJwt(kSecret).sign(R"({"sub":"x","iss":"other","exp":1900000000})"),
       "the token's issuer is not open-webui"},
  };
  for (const auto& [bad, why] : cases) {
    Request r = with_key(kApiKey);
    r.headers.set("X-OpenWebUI-User-Jwt", bad);
    r.headers.set("X-User-Id", "x");
    AuthDecision d = authorize(kOrdinary, r, f.credentials, kNow);
    EXPECT_EQ(status_of(d), 401u) << why;
    EXPECT_EQ(d.refusal->body, nlohmann::json({{"detail", "Invalid X-OpenWebUI-User-Jwt: " + why}}).dump());
  }
  // Without a configured secret the header is not read: the shared key works as before.
  Credentials off{ApiKeyAuth(kApiKey), ApiKeyAuth(kAdminKey)};
  Request r = with_key(kApiKey);
  r.headers.set("X-OpenWebUI-User-Jwt", none);
  r.headers.set("X-User-Id", "x");
  EXPECT_TRUE(authorize(kOrdinary, r, off, kNow).allowed());
}

TEST(AuthorizeCallers, RequireJwtRefusesTheSharedKeyAlone) {
  Fixture f;
  f.credentials.require_jwt = true;
  Request alone = with_key(kApiKey);
  alone.headers.set("X-User-Id", "alice");
  AuthDecision d = authorize(kOrdinary, alone, f.credentials, kNow);
  EXPECT_EQ(status_of(d), 401u);
  Request ws = with_key(kApiKey);
  EXPECT_EQ(status_of(authorize(kInHandler, ws, f.credentials, kNow)), 401u);
  // Controls: with a valid token it passes; public routes and user keys are not affected.
  Request with_token = with_key(kApiKey);
  with_token.headers.set("X-OpenWebUI-User-Jwt", token("alice"));
  EXPECT_TRUE(authorize(kOrdinary, with_token, f.credentials, kNow).allowed());
  Request pub = with_key(kApiKey);
  EXPECT_TRUE(authorize(kPublic, pub, f.credentials, kNow).allowed());
  Request user_key = with_key(f.alice.key);
  EXPECT_TRUE(authorize(kOrdinary, user_key, f.credentials, kNow).allowed());
}

}  // namespace
}  // namespace agentbox::http
