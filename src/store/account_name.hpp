#pragma once
// Account names derived from external user ids: a readable prefix and a hash of the whole id,
// "alice-3f2a9c". The hash makes names distinct for distinct ids; the prefix helps a person
// reading `ps` or the admin list. Names are valid Linux user names ([a-z][a-z0-9_-]*, <= 32).
#include <cstddef>
#include <string>
#include <string_view>

namespace agentbox {

constexpr size_t kAccountNamePrefixMax = 12;
constexpr size_t kAccountNameHashChars = 6;  // the usual length
constexpr size_t kAccountNameHashMax = 19;   // 12 + "-" + 19 = 32, the useradd limit

// Lowercased [a-z0-9_-] characters of the id, starting at its first letter, at most 12, no
// trailing '-' or '_'; "u" when nothing is usable ("", "ÄÖÜ", "1234").
std::string account_name_prefix(std::string_view external_id);

// prefix + "-" + the first hash_chars hex digits of SHA-256(external_id).
std::string account_name(std::string_view external_id, size_t hash_chars = kAccountNameHashChars);

// Whether `name` is one that external_id can have been given: account_name(external_id, n)
// for some n in [kAccountNameHashChars, kAccountNameHashMax]. A restore takes a name from the
// mirror only then, so the mirror cannot hand an id a name it would never have had.
bool is_account_name_of(std::string_view external_id, std::string_view name);

// Lowercase hex SHA-256 of data.
std::string sha256_hex(std::string_view data);

}  // namespace agentbox
