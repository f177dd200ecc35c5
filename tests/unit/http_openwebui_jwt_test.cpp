// OpenWebuiJwt: Open WebUI's token (HS256, iss open-webui, exp in the future, sub) names its
// user; every forgery and every failed check is refused, naming the check: alg none, another
// algorithm, a wrong secret, a changed claim, another issuer, an expired token, no expiry, no
// user, a token that is not three parts.
#include "http/openwebui_jwt.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace agentbox::http {
namespace {

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";
constexpr std::int64_t kNow = 1'800'000'000;

std::string b64url(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t bits = 0;
  int held = 0;
  for (unsigned char c : in) {
    bits = (bits << 8) | c;
    held += 8;
    while (held >= 6) {
      held -= 6;
      out.push_back(kAlphabet[(bits >> held) & 0x3f]);
    }
  }
  if (held > 0) out.push_back(kAlphabet[(bits << (6 - held)) & 0x3f]);
  return out;
}

// The claims Open WebUI's _mint_forward_user_jwt puts in (backend/open_webui/utils/headers.py).
nlohmann::json claims(const std::string& sub = "user-1") {
  return {{"sub", sub},          {"email", "ana@example.com"}, {"name", "Ana"},    {"role", "user"},
          {"iss", "open-webui"}, {"iat", kNow - 10},           {"exp", kNow + 300}};
}

std::string user_of(const std::variant<std::string, OpenWebuiJwt::Refused>& v) {
  return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "";
}
std::string why(const std::variant<std::string, OpenWebuiJwt::Refused>& v) {
  return std::holds_alternative<OpenWebuiJwt::Refused>(v) ? std::get<OpenWebuiJwt::Refused>(v).why : "";
}

TEST(OpenWebuiJwt, OpenWebuisTokenNamesItsUser) {
  const OpenWebuiJwt jwt(kSecret);
  EXPECT_EQ(user_of(jwt.verify(jwt.sign(claims().dump()), kNow)), "user-1");
  // A token PyJWT made (header {"alg":"HS256","typ":"JWT"}, its own key order) checks too.
  const std::string header = b64url(R"({"alg":"HS256","typ":"JWT"})");
  const std::string signed_by_us = jwt.sign(claims("user-2").dump());
  EXPECT_TRUE(signed_by_us.starts_with(header + "."));
}

TEST(OpenWebuiJwt, AlgNoneAndOtherAlgorithmsAreRefused) {
  const OpenWebuiJwt jwt(kSecret);
  const std::string payload = b64url(claims().dump());
  EXPECT_EQ(why(jwt.verify(b64url(R"({"alg":"none","typ":"JWT"})") + "." + payload + ".", kNow)),
            "the token is not signed with HS256");
  // The signature of HS256 under a header that says HS512: the header decides nothing.
  const std::string good = jwt.sign(claims().dump());
  const std::string sig = good.substr(good.rfind('.') + 1);
  EXPECT_EQ(why(jwt.verify(b64url(R"({"alg":"HS512"})") + "." + payload + "." + sig, kNow)),
            "the token is not signed with HS256");
  EXPECT_EQ(why(jwt.verify(b64url(R"({"typ":"JWT"})") + "." + payload + "." + sig, kNow)),
            "the token is not signed with HS256");
}

TEST(OpenWebuiJwt, AWrongSecretOrAChangedClaimIsRefused) {
  const OpenWebuiJwt jwt(kSecret);
  const OpenWebuiJwt other("another-secret-of-thirty-two-bytes!");
  EXPECT_EQ(why(jwt.verify(other.sign(claims().dump()), kNow)), "the token's signature is not valid");
  // alice's signature, bob's claims.
  const std::string good = jwt.sign(claims().dump());
  const std::size_t d1 = good.find('.'), d2 = good.rfind('.');
  const std::string forged = good.substr(0, d1) + "." + b64url(claims("bob").dump()) + good.substr(d2);
  EXPECT_EQ(why(jwt.verify(forged, kNow)), "the token's signature is not valid");
  EXPECT_EQ(why(jwt.verify(good.substr(0, d2) + ".", kNow)), "the token's signature is not valid");
  EXPECT_EQ(why(jwt.verify(good.substr(0, d2) + ".!!", kNow)), "the token's signature is not valid");
}

TEST(OpenWebuiJwt, IssuerExpiryAndUserAreChecked) {
  const OpenWebuiJwt jwt(kSecret);
  auto c = claims();
  c["iss"] = "someone-else";
  EXPECT_EQ(why(jwt.verify(jwt.sign(c.dump()), kNow)), "the token's issuer is not open-webui");
  c = claims();
  c.erase("iss");
  EXPECT_EQ(why(jwt.verify(jwt.sign(c.dump()), kNow)), "the token's issuer is not open-webui");
  c = claims();
  c["exp"] = kNow;  // expires at this second: no longer valid
  EXPECT_EQ(why(jwt.verify(jwt.sign(c.dump()), kNow)), "the token has expired");
  EXPECT_EQ(user_of(jwt.verify(jwt.sign(c.dump()), kNow - 1)), "user-1");
  c.erase("exp");
  EXPECT_EQ(why(jwt.verify(jwt.sign(c.dump()), kNow)), "the token has no expiry");
  c = claims();
  c["exp"] = "tomorrow";
  EXPECT_EQ(why(jwt.verify(jwt.sign(c.dump()), kNow)), "the token has no expiry");
  EXPECT_EQ(why(jwt.verify(jwt.sign(claims("").dump()), kNow)), "the token names no user (sub)");
  c = claims();
  c["sub"] = 42;
  EXPECT_EQ(why(jwt.verify(jwt.sign(c.dump()), kNow)), "the token names no user (sub)");
}

TEST(OpenWebuiJwt, ATokenOfAnotherShapeIsRefused) {
  const OpenWebuiJwt jwt(kSecret);
  const std::string good = jwt.sign(claims().dump());
  for (const std::string& bad : {std::string(), std::string("abc"), std::string("a.b"), good + ".x", std::string("..")})
    EXPECT_FALSE(why(jwt.verify(bad, kNow)).empty()) << bad;
  EXPECT_EQ(why(jwt.verify(std::string(9000, 'a'), kNow)), "the token is too long");
  EXPECT_EQ(why(jwt.verify(jwt.sign("[1,2]"), kNow)), "the token's claims are not JSON");
}

}  // namespace
}  // namespace agentbox::http
