#pragma once
// The key of a box: which box of an account a request goes to (issue 35). The default profile
// keeps the account's name, so nothing changes without /p/; a profile's box is
// "NAME~PROFILE", and a context's box under a profile with isolation "context"
// "NAME~PROFILE~HASH" (HASH: 16 hex digits of the context id's SHA-256). '~' is never in an
// account name ([a-z0-9_-]: account_name.hpp) nor in a profile's ([A-Za-z0-9_-]), so a key
// splits back without ambiguity. BoxManager, ProcessTable, Terminals, the strands, the egress
// listeners and the network log all key by it.
#include <string>
#include <string_view>

namespace agentbox {

inline constexpr char kBoxKeySeparator = '~';

// account; account~profile when profile is not ""; account~profile~hash when context is not "".
std::string box_key(std::string_view account, std::string_view profile, std::string_view context = {});
// The same key from a context's hash (what a workspace records), not its id.
std::string box_key_of_hash(std::string_view account, std::string_view profile, std::string_view hash);
// The account a key belongs to (the key itself for the default profile's box). Inline, as
// profile_of_box: the egress proxy links without the store's library (the static CLI).
inline std::string_view account_of_box(std::string_view key) { return key.substr(0, key.find(kBoxKeySeparator)); }
// The profile of a key, "" for the default profile's box.
inline std::string_view profile_of_box(std::string_view key) {
  const size_t at = key.find(kBoxKeySeparator);
  if (at == std::string_view::npos) return {};
  std::string_view rest = key.substr(at + 1);
  return rest.substr(0, rest.find(kBoxKeySeparator));
}
// What a context id is called in keys and paths: 16 hex digits of its SHA-256.
std::string context_hash(std::string_view context);

// Which box of an account, and what it shows as home.
struct BoxPlace {
  std::string key;          // box_key(...); "" = the account's name
  std::string profile;      // "" the default profile
  std::string home_source;  // the host directory shown as home; "" = the account's home
};

}  // namespace agentbox
