#pragma once
// The user Open WebUI vouches for: with FORWARD_USER_INFO_HEADER_JWT_SECRET set, Open WebUI
// sends X-OpenWebUI-User-Jwt, an HS256 JWT with claims sub (the user's id), email, name, role,
// iss "open-webui", iat and exp (300 s by default): backend/open_webui/utils/headers.py
// `_mint_forward_user_jwt`, ../shared/OWUI-NOTES.md "Headers Open WebUI sends". Checked here:
// the header's alg is HS256 (never "none", never what the token asks for), the signature by
// HMAC-SHA256 with the shared secret compared in constant time, iss is "open-webui", exp is in
// the future (a token without exp is refused), and sub is a non-empty string.
//
// Runs on: any thread (immutable after construction).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace agentbox::http {

class OpenWebuiJwt {
 public:
  static constexpr std::string_view kHeader = "X-OpenWebUI-User-Jwt";
  static constexpr std::string_view kIssuer = "open-webui";

  struct Refused {
    std::string why;  // for the 401's detail: names the check that failed, never the secret
  };

  explicit OpenWebuiJwt(std::string_view secret);

  // The user id (sub) of a valid token, else why it is refused. now: unix seconds.
  std::variant<std::string, Refused> verify(std::string_view token, std::int64_t now) const;

  // A token signed with this secret: for tests and the bench (Open WebUI makes the real ones).
  std::string sign(std::string_view payload_json) const;

 private:
  std::array<unsigned char, 32> mac(std::string_view signing_input) const;
  std::string secret_;
};

}  // namespace agentbox::http
