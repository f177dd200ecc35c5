#include "http/signed_links.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <charconv>

#include "util/error.hpp"
#include "util/random_hex.hpp"

namespace agentbox::http {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

SignedLinks::SignedLinks(std::string_view key) {
  ::SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), key_.data());
}

std::array<unsigned char, 32> SignedLinks::mac(std::string_view user, std::string_view path, int64_t expires) const {
  // Lengths first, so that no two (user, path) pairs share a message.
  std::string message = "agentbox-link-v1\n" + std::to_string(user.size()) + ":";
  message.append(user);
  message += std::to_string(path.size()) + ":";
  message.append(path);
  message += std::to_string(expires);
  std::array<unsigned char, 32> out{};
  unsigned int n = 0;
  if (!::HMAC(::EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
              reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &n) ||
      n != out.size())
    throw Error("HMAC-SHA256 failed");
  return out;
}

std::string SignedLinks::sign(std::string_view user, std::string_view path, int64_t expires) const {
  const auto digest = mac(user, path, expires);
  return std::to_string(expires) + "." + hex_of(digest.data(), digest.size());
}

bool SignedLinks::verify(std::string_view user, std::string_view path, std::string_view token, int64_t now) const {
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos || token.size() - dot - 1 != 64) return false;
  int64_t expires = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + dot, expires);
  if (ec != std::errc() || end != token.data() + dot || expires <= now) return false;
  std::array<unsigned char, 32> given{};
  for (size_t i = 0; i < given.size(); ++i) {
    const int hi = hex_value(token[dot + 1 + 2 * i]), lo = hex_value(token[dot + 2 + 2 * i]);
    if (hi < 0 || lo < 0) return false;
    given[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  const auto expected = mac(user, path, expires);
  return ::CRYPTO_memcmp(given.data(), expected.data(), given.size()) == 0;
}

}  // namespace agentbox::http
