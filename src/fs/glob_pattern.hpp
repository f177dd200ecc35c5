#pragma once
// GlobPattern: glob_search's patterns. "*", "?" and "[...]" match within one path component
// (fnmatch(3) per component; a leading dot is not special, as in Open Terminal); "**" as a whole
// component matches any number of components, none included. A pattern without '/' matches the
// entry's name at any depth ("*.py" finds every Python file, as Open Terminal's did); a pattern
// with '/' matches the path relative to the search directory from its start ("src/**/*.py").
#include <string>
#include <string_view>
#include <vector>

namespace agentbox {

class GlobPattern {
 public:
  explicit GlobPattern(std::string_view pattern);
  // `rel` is '/'-separated, relative to the search directory.
  bool matches(std::string_view rel) const;

 private:
  std::vector<std::string> parts_;
  bool by_name_;  // no '/' in the pattern: match the last component only
};

}  // namespace agentbox
