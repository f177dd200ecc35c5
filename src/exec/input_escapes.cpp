#include "exec/input_escapes.hpp"

#include <cstdint>

namespace agentbox::exec {

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Exactly `digits` hex digits at text[i..]; false (and nothing consumed) otherwise.
bool read_hex(std::string_view text, size_t i, size_t digits, uint32_t& cp) {
  if (i + digits > text.size()) return false;
  cp = 0;
  for (size_t k = 0; k < digits; ++k) {
    int v = hex_value(text[i + k]);
    if (v < 0) return false;
    cp = cp * 16 + static_cast<uint32_t>(v);
  }
  return true;
}

char simple_escape(char c) {
  switch (c) {
    case '\\': return '\\';
    case '\'': return '\'';
    case '"': return '"';
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'v': return '\v';
    default: return 0;
  }
}

}  // namespace

std::string decode_input_escapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    char c = text[i + 1];
    if (char s = simple_escape(c)) {
      out += s;
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (digits && read_hex(text, i + 2, digits, cp) && cp <= 0x10FFFF) {
      append_utf8(out, cp);
      i += 1 + digits;
      continue;
    }
    if (c >= '0' && c <= '7') {  // up to three octal digits
      size_t k = i + 1;
      cp = 0;
      while (k < text.size() && k < i + 4 && text[k] >= '0' && text[k] <= '7')
        cp = cp * 8 + static_cast<uint32_t>(text[k++] - '0');
      append_utf8(out, cp);
      i = k - 1;
      continue;
    }
    out += text[i];  // not an escape we know: keep the backslash
  }
  return out;
}

}  // namespace agentbox::exec
