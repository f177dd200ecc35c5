#include "fs/glob_pattern.hpp"

#include <fnmatch.h>

#include "fs/home_path.hpp"

namespace agentbox {
namespace {

std::vector<std::string> split_owned(std::string_view path) {
  auto parts = split_path(path);
  return std::vector<std::string>(parts.begin(), parts.end());  // fnmatch wants C strings
}

}  // namespace

GlobPattern::GlobPattern(std::string_view pattern)
    : parts_(split_owned(pattern)), by_name_(pattern.find('/') == std::string_view::npos) {}

bool GlobPattern::matches(std::string_view rel) const {
  const std::vector<std::string> path = split_owned(rel);
  if (by_name_) {
    return !path.empty() && parts_.size() == 1 && ::fnmatch(parts_[0].c_str(), path.back().c_str(), 0) == 0;
  }
  // can[i][j]: pattern parts i.. match path parts j.. (filled from the end, so "**" costs
  // O(parts × path) at worst instead of backtracking).
  const size_t np = parts_.size(), nq = path.size();
  std::vector<std::vector<char>> can(np + 1, std::vector<char>(nq + 1, 0));
  can[np][nq] = 1;
  for (size_t i = np; i-- > 0;) {
    for (size_t j = nq + 1; j-- > 0;) {
      if (parts_[i] == "**")
        can[i][j] = can[i + 1][j] || (j < nq && can[i][j + 1]);
      else
        can[i][j] = j < nq && can[i + 1][j + 1] && ::fnmatch(parts_[i].c_str(), path[j].c_str(), 0) == 0;
    }
  }
  return can[0][0];
}

}  // namespace agentbox
