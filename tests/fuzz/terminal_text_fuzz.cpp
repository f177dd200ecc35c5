// A terminal's output as a model reads it (exec/terminal_text.*), fed any bytes: what a user's
// programs print, read by read_user_terminal.
//
// Checks: the text is valid UTF-8 with no escape character, carriage return or other control
// character but line feed and tab; it is already clean (cleaning it again changes nothing);
// last_lines gives a tail of the text with at most that many lines.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "exec/terminal_text.hpp"
#include "fuzz_check.hpp"
#include "util/utf8.hpp"

using agentbox::exec::last_lines;
using agentbox::exec::terminal_text;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  const std::string text = terminal_text(raw);
  FUZZ_CHECK(agentbox::is_valid_utf8(text));
  FUZZ_CHECK(std::none_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f;
  }));
  FUZZ_CHECK(terminal_text(text) == text);
  const std::size_t n = size % 7;
  const std::string tail = last_lines(text, n);
  FUZZ_CHECK(std::string_view(text).ends_with(tail));
  std::string_view body(tail);
  if (body.ends_with('\n')) body.remove_suffix(1);
  FUZZ_CHECK(n == 0 ? tail.empty() : static_cast<std::size_t>(std::count(body.begin(), body.end(), '\n')) < n);
  return 0;
}
