#include "store/box_key.hpp"

#include "store/account_name.hpp"

namespace agentbox {

namespace {
constexpr size_t kContextHashChars = 16;
}

std::string box_key(std::string_view account, std::string_view profile, std::string_view context) {
  return box_key_of_hash(account, profile, context.empty() ? std::string() : context_hash(context));
}

std::string box_key_of_hash(std::string_view account, std::string_view profile, std::string_view hash) {
  std::string key(account);
  if (!profile.empty()) (key += kBoxKeySeparator) += profile;
  if (!hash.empty()) (key += kBoxKeySeparator) += hash;
  return key;
}

std::string context_hash(std::string_view context) { return sha256_hex(context).substr(0, kContextHashChars); }

}  // namespace agentbox
