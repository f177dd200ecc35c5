#pragma once
// restore_into_home: puts a saved copy (a file, a symlink or a directory tree, e.g. from the
// mirror of homes) back into an account's home.
//
// The source is the daemon's own tree, read as root but walked without following anything
// (openat O_NOFOLLOW, fstatat AT_SYMLINK_NOFOLLOW): a symlink in it is recreated as a symlink.
// Everything written into the home is written as the account (ConfinedDir::as_user) through
// the home's ConfinedDir, so no symlink in the home leads a write out of it and the account's
// permissions and quota apply. A file is replaced atomically (AtomicFile) and gets its bytes,
// mode and mtime back; a directory is created when missing (existing ones are merged into) and
// gets its mode back. Sockets, fifos and devices are skipped.
#include <cstdint>
#include <string>
#include <vector>

#include "fs/confined_dir.hpp"

namespace agentbox {

struct RestoreResult {
  uint64_t files = 0;  // regular files and symlinks written
  uint64_t bytes = 0;
  uint64_t dirs = 0;
  std::vector<std::string> errors;  // "PATH: reason" for entries of a tree that failed (first few)
};

// Restores the entry `source_name` of `source_dir_fd` to `target` (the entry it replaces or
// creates). A directory's failing entries are listed in errors and the rest goes on; a single
// file that cannot be written throws FsError. `target` may be the home itself (then
// source_name must be a directory, and its entries go into the home).
RestoreResult restore_into_home(const ConfinedDir& home, int source_dir_fd, const std::string& source_name,
                                const HomePath& target);

}  // namespace agentbox
