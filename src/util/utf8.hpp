#pragma once
// UTF-8 for the whole daemon: checks for text that goes into JSON answers (nlohmann::json refuses
// invalid UTF-8), for telling text files from binary ones (fs/) and for WebSocket text frames
// (http/); and where to cut bytes so no character is split (a split one shows as U+FFFD on both
// sides): output cut into answers by offsets (exec/), text shortened for display (agent/, fs/).
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

// The largest n <= max such that s.substr(0, n) does not end inside a sequence (it steps back
// over at most 3 continuation bytes: no sequence has more).
size_t utf8_cut(std::string_view s, size_t max);

// Byte length of the first `chars` code points of valid UTF-8 `s` (all of it if shorter).
size_t utf8_prefix_of_chars(std::string_view s, size_t chars);

// Bytes at the end of s that begin a multi-byte sequence s does not finish (0..3). Bytes that
// cannot be the start of such a sequence (invalid UTF-8) count as complete.
size_t utf8_unfinished_tail(std::string_view s);

// Continuation bytes (10xxxxxx) at the start of s, at most 3: the rest of a character whose
// beginning lies before s.
size_t utf8_orphan_head(std::string_view s);

}  // namespace agentbox
