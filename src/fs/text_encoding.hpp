#pragma once
// How a file's text is encoded, judged from its head (read_file): UTF-8; a single-byte code
// page, read as Windows-1252 (a superset of Latin-1's printable characters, what such files
// from Windows and old Unix tools mostly are); or not text at all.
#include <string>
#include <string_view>

namespace agentbox {

enum class TextEncoding { utf8, single_byte, binary };

// head: the file's first bytes (kSniffBytes); whole: head is all of the file. A NUL, or many
// control characters that text does not use, is binary; valid UTF-8 (a sequence cut by the end
// of the head allowed) is UTF-8; anything else is single-byte text.
TextEncoding sniff_text_encoding(std::string_view head, bool whole);

// Windows-1252 bytes as UTF-8; the five bytes it leaves undefined become U+FFFD.
std::string cp1252_to_utf8(std::string_view bytes);

}  // namespace agentbox
