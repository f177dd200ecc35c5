#pragma once
// send_process_input's text: models write control keys as escape sequences ("\n", "\x03" for
// ctrl-C, "\u001b" for Esc). Decoded as Python's unicode_escape does, which is what Open
// Terminal clients expect: \\ \' \" \a \b \f \n \r \t \v, \ooo (octal), \xHH, \uHHHH,
// \UHHHHHHHH; a code point is written as UTF-8. Anything else (an unknown or cut escape) is
// kept as written.
#include <string>
#include <string_view>

namespace agentbox::exec {

std::string decode_input_escapes(std::string_view text);

}  // namespace agentbox::exec
