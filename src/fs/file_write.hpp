#pragma once
// write_file and replace_file_content: whole-file writes that replace atomically (AtomicFile).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/confined_dir.hpp"

namespace agentbox {

struct WriteResult {
  std::string path;   // as the box sees it
  uint64_t size = 0;  // bytes written
};

// Writes `content` to `p`, creating missing parent directories (owned by the account) when
// `create_parents`. A symlink at `p` pointing inside the home is written through; one leading
// out is refused (forbidden). On any error the old file (or nothing) stays in place.
WriteResult write_atomic(const ConfinedDir& home, const HomePath& p, std::string_view content,
                         bool create_parents = true);

struct Replacement {
  std::string target;
  std::string replacement;
  std::optional<uint64_t> start_line;  // narrow the search to these lines (1-based, inclusive)
  std::optional<uint64_t> end_line;
  bool allow_multiple = false;
};

// Applies `replacements` in order to the text file `p`, then writes it atomically. Errors as
// Open Terminal's (bad_request): "Target string not found: 'TARGET'" (target as Python's repr,
// first 100 characters) and "Found N occurrences of target string but allow_multiple is false".
// Missing file: not_found; binary file: unsupported_media; over max_bytes: too_large.
WriteResult replace_in_file(const ConfinedDir& home, const HomePath& p, const std::vector<Replacement>& replacements,
                            uint64_t max_bytes = 16ull << 20);

// Python's repr() of a str, for error texts that match Open Terminal's.
std::string python_repr(std::string_view s);

}  // namespace agentbox
