#include "exec/terminal_text.hpp"

#include "util/utf8.hpp"

namespace agentbox::exec {
namespace {

constexpr char kEsc = '\x1b';
constexpr char kBel = '\x07';

// Where the escape sequence at raw[i] (ESC) ends: the index after it, or raw.size() when it is
// cut off. ECMA-48: CSI is ESC [ params intermediates final (0x40-0x7E); OSC, DCS, SOS, PM and
// APC run to ST (ESC \) or, for OSC, BEL; the rest are ESC, intermediates (0x20-0x2F), final.
size_t skip_escape(std::string_view raw, size_t i) {
  if (i + 1 >= raw.size()) return raw.size();
  const char kind = raw[i + 1];
  if (kind == '[') {
    size_t j = i + 2;
    while (j < raw.size() && !(raw[j] >= 0x40 && raw[j] <= 0x7e)) ++j;
    return j < raw.size() ? j + 1 : raw.size();
  }
  if (kind == ']' || kind == 'P' || kind == 'X' || kind == '^' || kind == '_') {
    for (size_t j = i + 2; j < raw.size(); ++j) {
      if (raw[j] == kBel && kind == ']') return j + 1;
      if (raw[j] == kEsc && j + 1 < raw.size() && raw[j + 1] == '\\') return j + 2;
    }
    return raw.size();
  }
  size_t j = i + 1;
  while (j < raw.size() && raw[j] >= 0x20 && raw[j] <= 0x2f) ++j;
  return j < raw.size() ? j + 1 : raw.size();
}

}  // namespace

std::string terminal_text(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  size_t line_start = 0;   // in out: where the current line begins
  bool overwrite = false;  // a lone carriage return: the next text starts the line afresh
  for (size_t i = 0; i < raw.size();) {
    const char c = raw[i];
    if (c == kEsc) {
      i = skip_escape(raw, i);
      continue;
    }
    if (c == '\r') {
      overwrite = true;  // unless a line feed follows, which ends the line as it is
      ++i;
      continue;
    }
    if (c == '\n') {
      overwrite = false;
      out.push_back('\n');
      line_start = out.size();
      ++i;
      continue;
    }
    if (c == '\b') {
      // The character before the cursor, all its bytes ("\b \b" is how shells erase one).
      size_t k = out.size();
      while (k > line_start && (static_cast<unsigned char>(out[--k]) & 0xC0) == 0x80) {
      }
      out.resize(k);
      ++i;
      continue;
    }
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) {
      ++i;  // bells, shifts and the like show nothing
      continue;
    }
    if (overwrite) {
      out.resize(line_start);
      overwrite = false;
    }
    out.push_back(c);
    ++i;
  }
  return to_valid_utf8(out);
}

std::string last_lines(std::string_view text, size_t n) {
  if (n == 0) return {};
  size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;  // the final line end closes the last line
  size_t pos = end;
  for (size_t found = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++found == n) break;
  }
  return std::string(text.substr(pos));
}

}  // namespace agentbox::exec
