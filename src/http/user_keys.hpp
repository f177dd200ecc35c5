#pragma once
// Per-user API keys (issue 33): a key that carries its user, so a browser holding it needs no
// X-User-Id. A key is "abk_<id>_<secret>": the id (16 hex digits) is public and finds the
// entry, the secret (64 hex digits, 256 bits of the kernel's CSPRNG) is what proves it. Only
// SHA-256 digests are kept, here and in the store (store/api_key_store.hpp); a presented key is
// hashed and its digest compared with CRYPTO_memcmp, so the time taken says nothing of the
// secret. The map is loaded once at start and changed on create and revoke, so checking a key
// is a hash, a map lookup under a shared lock and a compare: no SQLite on the API thread.
//
// Runs on: any thread. Lookups take a shared lock; add and remove (the admin routes, on the
// file pool) take it exclusively.
#include <array>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace agentbox::http {

using KeyDigest = std::array<unsigned char, 32>;  // SHA-256

class UserKeys {
 public:
  static constexpr std::string_view kPrefix = "abk_";

  struct Minted {
    std::string id;   // 16 hex digits
    std::string key;  // shown to the operator once, never kept
    KeyDigest digest;
  };
  // A new id and key, from the kernel's CSPRNG.
  static Minted mint();
  static KeyDigest digest_of(std::string_view key);
  static std::string hex_of(const KeyDigest& digest);
  static std::optional<KeyDigest> digest_from_hex(std::string_view hex);
  // Whether a presented token has the shape of a user key (and so is checked as one only).
  static bool looks_like(std::string_view token) { return token.substr(0, kPrefix.size()) == kPrefix; }

  // The user of a live key; nullopt for a token that is no live key of this set.
  std::optional<std::string> user_of(std::string_view token) const;

  void add(const std::string& id, const std::string& user, const KeyDigest& digest);
  bool remove(const std::string& id);  // false when there was no such key
  std::size_t size() const;

 private:
  struct Entry {
    std::string user;
    KeyDigest digest;
  };
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, Entry> by_id_;  // guarded by mu_
};

}  // namespace agentbox::http
