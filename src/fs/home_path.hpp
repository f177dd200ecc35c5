#pragma once
// HomePath: a user-supplied path turned into a path relative to the account's home, checked
// lexically only. The forms accepted (DESIGN §6): relative to the session cwd (else the home),
// "~" / "~/...", and absolute as the box sees it ("/home/NAME/..."). "." and empty components
// are dropped and ".." is applied lexically (as `cd` does); a path that would climb above the
// home, or an absolute one elsewhere, is refused here with FsError forbidden.
//
// This is only the first gate: symlinks are resolved later by ConfinedDir from a directory
// descriptor, where the kernel keeps the walk inside the home.
#include <string>
#include <string_view>
#include <vector>

namespace agentbox {

struct HomePath {
  std::string rel;    // relative to the home, no leading or trailing '/', never ".."; "" = home
  std::string shown;  // the same path as the box sees it ("/home/NAME/rel"), for answers and errors

  bool is_home() const { return rel.empty(); }
  // The last component ("" for the home) and the path of the directory holding it.
  std::string_view name() const;
  HomePath parent(std::string_view box_home) const;
  // This path with one more component (a plain name from a directory listing).
  HomePath child(std::string_view name) const;
};

// The components of a '/'-separated path, without empty and "." ones ("a//./b/" → a, b).
std::vector<std::string_view> split_path(std::string_view path);

// Parses `user_path` (see above). `cwd` is the session's working directory in any accepted
// form, "" for the home. `box_home` is the home as the box sees it, e.g. "/home/alice".
// Throws FsError: bad_request for a NUL byte, forbidden for a path leaving the home.
HomePath parse_home_path(std::string_view user_path, std::string_view box_home, std::string_view cwd = {});

}  // namespace agentbox
