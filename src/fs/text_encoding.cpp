#include "fs/text_encoding.hpp"

#include <cstdint>

#include "fs/content_type.hpp"
#include "util/utf8.hpp"

namespace agentbox {
namespace {

// Code points of 0x80..0x9F in Windows-1252; 0 where it has none.
constexpr uint16_t kHigh[32] = {0x20AC, 0,      0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
                                0x2039, 0x0152, 0,      0x017D, 0,      0,      0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
                                0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0,      0x017E, 0x0178};

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Control characters text uses: tab, newline, vertical tab, form feed, carriage return,
// backspace (overstrike in man pages), escape (colours).
bool text_control(unsigned char c) {
  return c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' || c == '\b' || c == 0x1B;
}

}  // namespace

TextEncoding sniff_text_encoding(std::string_view head, bool whole) {
  bool cut = !whole;
  if (head.size() > kSniffBytes) {
    head = head.substr(0, kSniffBytes);
    cut = true;
  }
  if (head.find('\0') != std::string_view::npos) return TextEncoding::binary;
  if (is_valid_utf8(head, cut)) return TextEncoding::utf8;
  // Not UTF-8: text in a single-byte code page, unless control characters say otherwise.
  size_t controls = 0;
  for (unsigned char c : head)
    if (c < 0x20 && !text_control(c)) ++controls;
  return controls * 100 > head.size() ? TextEncoding::binary : TextEncoding::single_byte;
}

std::string cp1252_to_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 4);
  for (unsigned char c : bytes) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0xA0) {
      append_utf8(out, kHigh[c - 0x80] ? kHigh[c - 0x80] : 0xFFFD);
    } else {
      append_utf8(out, c);  // Latin-1 = the first 256 code points
    }
  }
  return out;
}

}  // namespace agentbox
