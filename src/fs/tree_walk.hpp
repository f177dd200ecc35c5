#pragma once
// walk_tree: the directory walk under grep and glob. It goes down from a directory descriptor
// one name at a time with open_in_dir (O_NOFOLLOW, no mount crossing), so symlinks are reported
// but never entered and the walk cannot leave the tree it started in. Order: a directory's
// entries by name, then its subdirectories, each the same way. Bounded by WalkLimits.
#include <dirent.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "fs/dir_entries.hpp"

namespace agentbox {

// grep and glob accept max_results in 1..kMaxSearchResults; check_max_results throws
// bad_request otherwise.
inline constexpr int kMaxSearchResults = 500;
void check_max_results(int max_results);

struct WalkLimits {
  uint64_t max_entries = 200000;  // entries looked at in all
  int max_depth = 64;             // directory levels below the start
};

enum class Visit { next, prune, stop };  // prune: do not enter this directory

struct WalkEntry {
  int dirfd;  // the directory holding it
  const DirEntry& entry;
  std::string_view rel;  // path relative to the start directory
  unsigned char type;    // DT_DIR, DT_REG, DT_LNK or other DT_*, never DT_UNKNOWN
};

// Calls `visit` for every entry below `dirfd` (shown: its path as the box sees it). Returns false
// when a limit cut the walk short (a `stop` from `visit` is not a cut). Unreadable
// subdirectories are skipped.
bool walk_tree(int dirfd, const std::string& shown, const WalkLimits& limits,
               const std::function<Visit(const WalkEntry&)>& visit);

}  // namespace agentbox
