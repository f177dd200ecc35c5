#pragma once
// grep_search: lines matching a pattern in the text files below a directory (or in one file).
// Patterns are RE2 (linear time in the input, so a model-supplied regex cannot stall a worker).
#include <cstdint>
#include <string>
#include <vector>

#include "fs/confined_dir.hpp"
#include "fs/tree_walk.hpp"

namespace agentbox {

struct GrepOptions {
  std::string query;
  bool regex = true;  // false: the query is a literal string
  bool case_insensitive = false;
  std::vector<std::string> include;       // fnmatch(3) globs on the file name; any may match
  bool match_per_line = true;             // false: one match per file, file name only
  int max_results = 50;                   // 1..500
  uint64_t max_file_bytes = 16ull << 20;  // larger files are skipped
  size_t max_line_bytes = 1000;           // a longer matching line is cut to this (whole UTF-8 chars)
  // Only the first this many bytes of a line are searched (and held in memory): a match must
  // lie within them, and `$` also matches where they end.
  size_t max_scanned_line_bytes = 2 << 20;
  WalkLimits limits;
};

struct GrepMatch {
  std::string file;     // as the box sees it ("/home/NAME/src/a.c"), like Open Terminal's
  uint64_t line = 0;    // 1-based; 0 when match_per_line is false
  std::string content;  // the line without its end; empty when match_per_line is false
};

struct GrepResult {
  std::string query;
  std::string path;  // what was searched, as the box sees it
  std::vector<GrepMatch> matches;
  bool truncated = false;  // more matches exist, or a walk limit was reached
};

// Searches `p`: a file, or every regular file below a directory (symlinks are not followed).
// Skipped before any data is read: files over max_file_bytes and files with a hole (sparse: they
// cost a reader time, not their owner disk). Skipped after the first block: binary files, whose
// first 8 KiB hold a NUL or invalid UTF-8. Files are read kGrepBlockBytes at a time, so a grep
// holds one block and one line (max_scanned_line_bytes) whatever the file size; a read error
// ends that file's search (matches already found stay). Missing path: not_found "Search path
// not found: ..."; invalid regex: bad_request "Invalid regex: ...".
GrepResult grep_files(const ConfinedDir& home, const HomePath& p, const GrepOptions& opt);

// How much of a file grep reads at a time.
inline constexpr size_t kGrepBlockBytes = 64 << 10;

}  // namespace agentbox
