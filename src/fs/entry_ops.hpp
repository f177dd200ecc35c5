#pragma once
// mkdir, delete and move: operations on directory entries. An entry that is a symlink is acted
// on itself (deleted, moved), never followed, so a link leading out of the home can be cleaned
// up while its target stays untouched.
#include <string>

#include "fs/confined_dir.hpp"

namespace agentbox {

// Creates `p` and missing parents (owned by the account); an existing directory is fine.
// Returns `p` as the box sees it. A file in the way: bad_request.
std::string make_dir(const ConfinedDir& home, const HomePath& p);

struct RemoveResult {
  std::string path;  // as the box sees it
  std::string type;  // "directory" for a real directory, "file" for anything else (links too)
};

// Deletes `p`, a directory with everything below it. The walk opens each directory with
// O_NOFOLLOW from its parent's descriptor and unlinks links as links, so it never leaves the
// tree it started in. Missing: not_found "Path not found: ..."; the home itself: forbidden.
// A tree deeper than kMaxRemoveDepth levels stops the walk with bad_request (one descriptor is
// held per level); what was deleted before that stays deleted.
RemoveResult remove_entry(const ConfinedDir& home, const HomePath& p);
inline constexpr int kMaxRemoveDepth = 256;

// The same walk for the entry `name` of `dirfd` (a file, link or whole directory tree); `shown`
// names it in errors. The trash empties itself with it.
void remove_tree_at(int dirfd, const std::string& name, const std::string& shown);

struct MoveResult {
  std::string source;       // as the box sees it
  std::string destination;  // as the box sees it
};

// Renames `source` to `destination` (renameat2 RENAME_NOREPLACE), with Open Terminal's
// statuses: missing source → not_found, missing destination directory → bad_request, an
// existing destination → conflict, a directory into itself → bad_request.
MoveResult move_entry(const ConfinedDir& home, const HomePath& source, const HomePath& destination);

}  // namespace agentbox
