#include "store/account_name.hpp"

#include <openssl/evp.h>

#include "util/error.hpp"
#include "util/random_hex.hpp"

namespace agentbox {

std::string account_name_prefix(std::string_view external_id) {
  std::string prefix;
  for (char raw : external_id) {
    if (prefix.size() == kAccountNamePrefixMax) break;
    char c = (raw >= 'A' && raw <= 'Z') ? static_cast<char>(raw - 'A' + 'a') : raw;
    bool letter = c >= 'a' && c <= 'z';
    bool allowed = letter || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!allowed || (prefix.empty() && !letter)) continue;
    prefix += c;
  }
  while (!prefix.empty() && (prefix.back() == '-' || prefix.back() == '_')) prefix.pop_back();
  return prefix.empty() ? "u" : prefix;
}

std::string account_name(std::string_view external_id, size_t hash_chars) {
  if (hash_chars == 0 || hash_chars > kAccountNameHashMax)
    throw Error("account name hash length " + std::to_string(hash_chars) + " out of range");
  return account_name_prefix(external_id) + "-" + sha256_hex(external_id).substr(0, hash_chars);
}

bool is_account_name_of(std::string_view external_id, std::string_view name) {
  const std::string full = account_name(external_id, kAccountNameHashMax);
  const size_t dash = full.size() - kAccountNameHashMax;  // the prefix and its "-"
  return name.size() >= dash + kAccountNameHashChars && name.size() <= full.size() &&
         full.compare(0, name.size(), name) == 0;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) != 1)
    throw Error("EVP_Digest(sha256) failed");
  return hex_of(digest, len);
}

}  // namespace agentbox
