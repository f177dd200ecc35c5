#pragma once
// A prefix of at most N bytes that does not end inside a UTF-8 character, for text the agent
// code shortens before showing it (diagnostic lines, long tool results): a cut character would
// turn into U+FFFD, or make a JSON dump replace it.
#include <cstddef>
#include <string_view>

namespace agentbox::agent {

inline std::string_view utf8_prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  // Back over at most 3 bytes while the first byte left out continues a character.
  for (int back = 0; back < 3 && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80; ++back) --n;
  return s.substr(0, n);
}

}  // namespace agentbox::agent
