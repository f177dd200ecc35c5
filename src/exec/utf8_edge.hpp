#pragma once
// Where a UTF-8 sequence starts and ends near the edges of a byte range: output is cut into
// answers by byte offsets, and a cut inside a character would show as U+FFFD on both sides.
#include <cstddef>
#include <string_view>

namespace agentbox::exec {

// Bytes at the end of s that begin a multi-byte sequence s does not finish (0..3). Bytes that
// cannot be the start of such a sequence (invalid UTF-8) count as complete.
size_t utf8_unfinished_tail(std::string_view s);

// Continuation bytes (10xxxxxx) at the start of s, at most 3: the rest of a character whose
// beginning lies before s.
size_t utf8_orphan_head(std::string_view s);

}  // namespace agentbox::exec
