#pragma once
// UTF-8 checks for text that goes into JSON answers (nlohmann::json refuses invalid UTF-8) and
// for telling text files from binary ones (fs/), and for WebSocket text frames (http/).
#include <cstddef>
#include <string>
#include <string_view>

namespace agentbox {

// Length of the longest prefix of `s` made of whole, valid UTF-8 sequences.
size_t valid_utf8_prefix(std::string_view s);

// True when `s` is valid UTF-8, allowing a sequence cut off by the end of `s` when `may_be_cut`
// (for a sample taken from the head of a file).
bool is_valid_utf8(std::string_view s, bool may_be_cut = false);

// `s` with each invalid byte replaced by U+FFFD.
std::string to_valid_utf8(std::string_view s);

// The largest n <= max such that s.substr(0, n) does not end inside a sequence.
size_t utf8_cut(std::string_view s, size_t max);

// Byte length of the first `chars` code points of valid UTF-8 `s` (all of it if shorter).
size_t utf8_prefix_of_chars(std::string_view s, size_t chars);

}  // namespace agentbox
