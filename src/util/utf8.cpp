#include "util/utf8.hpp"

namespace agentbox {
namespace {

// Length of the valid sequence starting at s[i], 0 when invalid, or -1 when it is cut off by
// the end of s but valid so far. Follows RFC 3629: no overlong forms, no surrogates, max U+10FFFF.
int sequence_length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  int len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int k = 1; k < len; ++k) {
    if (i + static_cast<size_t>(k) >= s.size()) return -1;
    unsigned char x = b(i + static_cast<size_t>(k));
    if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return 0;
  }
  return len;
}

}  // namespace

size_t valid_utf8_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    int n = sequence_length(s, i);
    if (n <= 0) break;
    i += static_cast<size_t>(n);
  }
  return i;
}

bool is_valid_utf8(std::string_view s, bool may_be_cut) {
  size_t n = valid_utf8_prefix(s);
  if (n == s.size()) return true;
  return may_be_cut && sequence_length(s, n) == -1;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int n = sequence_length(s, i);
    if (n > 0) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

size_t utf8_cut(std::string_view s, size_t max) {
  if (max >= s.size()) return s.size();
  size_t n = max;
  // Step back over continuation bytes to the start of the sequence that crosses `max`.
  for (int back = 0; back < 3 && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80; ++back) --n;
  return n;
}

size_t utf8_prefix_of_chars(std::string_view s, size_t chars) {
  size_t i = 0;
  for (size_t c = 0; c < chars && i < s.size(); ++c) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  }
  return i;
}

namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the sequence a lead byte announces; 0 for a byte that is not a lead byte.
size_t lead_length(unsigned char c) {
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
  const size_t need = lead_length(static_cast<unsigned char>(s[lead_at]));
  const size_t have = back + 1;
  return need > have ? have : 0;
}

size_t utf8_orphan_head(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && n < 3 && is_continuation(static_cast<unsigned char>(s[n]))) ++n;
  return n;
}

}  // namespace agentbox
