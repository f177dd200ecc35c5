#include "store/box_key.hpp"

#include "store/account_name.hpp"

namespace agentbox {

namespace {
constexpr size_t kContextHashChars = 16;
}

std::string box_key(std::string_view account, std::string_view profile, std::string_view context) {
  std::string key(account);
  if (!profile.empty()) (key += kBoxKeySeparator) += profile;
  if (!context.empty()) (key += kBoxKeySeparator) += context_hash(context);
  return key;
}

std::string context_hash(std::string_view context) { return sha256_hex(context).substr(0, kContextHashChars); }

}  // namespace agentbox
