// send_process_input's escape decoding (exec/input_escapes.*), fed any text.
//
// Checks: the output is never longer than the input (each escape is at least as long as the
// UTF-8 it makes); text without a backslash comes out unchanged; a backslash doubled decodes to
// one, so escaping every backslash of any text and decoding gives the text back; decoding is
// a function of the text alone (same input, same output) and splits at any point where no
// escape is cut: decode(a + b) == decode(a) + decode(b) when a ends outside an escape (a
// prefix of plain characters).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "exec/input_escapes.hpp"
#include "fuzz_check.hpp"

using agentbox::exec::decode_input_escapes;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const std::string out = decode_input_escapes(text);
  FUZZ_CHECK(out.size() <= text.size());
  if (text.find('\\') == std::string_view::npos) FUZZ_CHECK(out == text);
  FUZZ_CHECK(decode_input_escapes(text) == out);

  // Every backslash escaped: the text itself comes back, whatever it holds.
  std::string escaped;
  for (char c : text) {
    if (c == '\\') escaped += '\\';
    escaped += c;
  }
  FUZZ_CHECK(decode_input_escapes(escaped) == text);

  // Plain text before the first backslash decodes on its own.
  const std::size_t plain = text.find('\\');
  if (plain != std::string_view::npos && plain > 0)
    FUZZ_CHECK(decode_input_escapes(text.substr(0, plain)) + decode_input_escapes(text.substr(plain)) == out);
  return 0;
}
