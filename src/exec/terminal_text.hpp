#pragma once
// A terminal's output as text a model can read (read_user_terminal): escape sequences (colours,
// cursor moves, titles, bracketed paste) removed, line ends made "\n", what the terminal would
// have overwritten on a line (a carriage return, backspaces) applied, other control characters
// dropped; then the last N lines. Pure: no I/O.
#include <cstddef>
#include <string>
#include <string_view>

namespace agentbox::exec {

// `raw` as the screen would show its lines, without escapes. A sequence cut off at either end
// (raw is a window of a longer stream) is dropped, not shown in part. Invalid UTF-8 becomes
// U+FFFD.
std::string terminal_text(std::string_view raw);

// The last `n` lines of text (a final line end does not start another line); all of it when it
// has fewer.
std::string last_lines(std::string_view text, size_t n);

}  // namespace agentbox::exec
