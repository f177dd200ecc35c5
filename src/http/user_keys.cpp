#include "http/user_keys.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <mutex>

#include "util/error.hpp"
#include "util/random_hex.hpp"

namespace agentbox::http {

namespace {

constexpr std::size_t kIdHexDigits = 16;
constexpr std::size_t kSecretBytes = 32;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The id of "abk_<id>_<secret>", or empty when the token does not have that shape.
std::string_view id_of(std::string_view token) {
  if (!UserKeys::looks_like(token)) return {};
  token.remove_prefix(UserKeys::kPrefix.size());
  if (token.size() <= kIdHexDigits || token[kIdHexDigits] != '_') return {};
  return token.substr(0, kIdHexDigits);
}

}  // namespace

UserKeys::Minted UserKeys::mint() {
  Minted m;
  m.id = random_hex(kIdHexDigits / 2);
  m.key = std::string(kPrefix) + m.id + "_" + random_hex(kSecretBytes);
  m.digest = digest_of(m.key);
  return m;
}

KeyDigest UserKeys::digest_of(std::string_view key) {
  KeyDigest out{};
  unsigned int len = 0;
  if (EVP_Digest(key.data(), key.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size())
    throw Error("EVP_Digest(sha256) failed");
  return out;
}

std::string UserKeys::hex_of(const KeyDigest& digest) { return agentbox::hex_of(digest.data(), digest.size()); }

std::optional<KeyDigest> UserKeys::digest_from_hex(std::string_view hex) {
  KeyDigest out{};
  if (hex.size() != 2 * out.size()) return std::nullopt;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return out;
}

std::optional<std::string> UserKeys::user_of(std::string_view token) const {
  const std::string_view id = id_of(token);
  if (id.empty()) return std::nullopt;
  const KeyDigest presented = digest_of(token);
  std::shared_lock lock(mu_);
  auto it = by_id_.find(std::string(id));
  if (it == by_id_.end()) return std::nullopt;
  if (CRYPTO_memcmp(presented.data(), it->second.digest.data(), presented.size()) != 0) return std::nullopt;
  return it->second.user;
}

void UserKeys::add(const std::string& id, const std::string& user, const KeyDigest& digest) {
  std::unique_lock lock(mu_);
  by_id_[id] = Entry{user, digest};
}

bool UserKeys::remove(const std::string& id) {
  std::unique_lock lock(mu_);
  return by_id_.erase(id) > 0;
}

std::size_t UserKeys::size() const {
  std::shared_lock lock(mu_);
  return by_id_.size();
}

}  // namespace agentbox::http
