#pragma once
// The Bearer API key check. Only a SHA-256 digest of the key is kept; a presented key is hashed
// and the digests compared with CRYPTO_memcmp, so the comparison time depends on neither the
// key's content nor its length, and the key itself never sits in this object (or a log).
#include <array>
#include <optional>
#include <string_view>

namespace agentbox::http {

// The token of an Authorization header "Bearer <token>" (scheme case-insensitive), else nullopt.
std::optional<std::string_view> bearer_token(std::string_view authorization_header);

class ApiKeyAuth {
 public:
  // An empty key accepts nothing (fail closed).
  explicit ApiKeyAuth(std::string_view api_key);

  // True when the Authorization header value is "Bearer <key>" (scheme case-insensitive).
  bool accepts(std::string_view authorization_header) const;

 private:
  bool enabled_ = false;
  std::array<unsigned char, 32> digest_{};
};

}  // namespace agentbox::http
