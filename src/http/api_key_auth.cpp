#include "http/api_key_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <stdexcept>

namespace agentbox::http {

namespace {

std::array<unsigned char, 32> sha256(std::string_view data) {
  std::array<unsigned char, 32> out{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size())
    throw std::runtime_error("EVP_Digest(sha256) failed");
  return out;
}

bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if ((a[i] | 0x20) != (b[i] | 0x20)) return false;
  return true;
}

}  // namespace

std::optional<std::string_view> bearer_token(std::string_view authorization_header) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization_header.size() < kScheme.size() ||
      !iequals_ascii(authorization_header.substr(0, kScheme.size()), kScheme))
    return std::nullopt;
  return authorization_header.substr(kScheme.size());
}

ApiKeyAuth::ApiKeyAuth(std::string_view api_key) : enabled_(!api_key.empty()), digest_(sha256(api_key)) {}

bool ApiKeyAuth::accepts(std::string_view authorization_header) const {
  const auto token = bearer_token(authorization_header);
  if (!enabled_ || !token) return false;
  auto presented = sha256(*token);
  return CRYPTO_memcmp(presented.data(), digest_.data(), digest_.size()) == 0;
}

}  // namespace agentbox::http
