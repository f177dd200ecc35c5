#pragma once
// glob_search: files and directories below a directory whose path matches a pattern.
#include <string>
#include <vector>

#include "fs/confined_dir.hpp"
#include "fs/tree_walk.hpp"

namespace agentbox {

enum class GlobType { any, file, directory };

struct GlobOptions {
  std::string pattern;               // GlobPattern syntax (glob_pattern.hpp)
  std::vector<std::string> exclude;  // same syntax; an excluded directory is not entered
  GlobType type = GlobType::any;
  int max_results = 50;  // 1..500
  WalkLimits limits;
};

struct GlobMatch {
  std::string path;  // relative to the searched directory
  std::string type;  // "file" or "directory" (a link inside the home: its target's type)
  uint64_t size = 0;
  double modified = 0;  // Unix seconds
};

struct GlobResult {
  std::string pattern;
  std::string path;  // the searched directory as the box sees it
  std::vector<GlobMatch> matches;
  bool truncated = false;  // more matches exist, or a walk limit was reached
};

// Missing directory: not_found "Search directory not found: ..."; max_results out of range or
// an empty pattern: bad_request.
GlobResult glob_files(const ConfinedDir& home, const HomePath& dir, const GlobOptions& opt);

}  // namespace agentbox
