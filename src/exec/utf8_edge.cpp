#include "exec/utf8_edge.hpp"

namespace agentbox::exec {
namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the sequence a lead byte announces; 0 for a byte that is not a lead byte.
size_t sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

}  // namespace

size_t utf8_unfinished_tail(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the lead byte they belong to.
  size_t back = 0;
  while (back < s.size() && back < 3 && is_continuation(static_cast<unsigned char>(s[s.size() - 1 - back]))) ++back;
  if (back == s.size()) return 0;  // no lead byte in reach: nothing to hold back
  const size_t lead_at = s.size() - 1 - back;
  const size_t need = sequence_length(static_cast<unsigned char>(s[lead_at]));
  const size_t have = back + 1;
  return need > have ? have : 0;
}

size_t utf8_orphan_head(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && n < 3 && is_continuation(static_cast<unsigned char>(s[n]))) ++n;
  return n;
}

}  // namespace agentbox::exec
