#pragma once
// ConfinedDir: one account's home, held as a directory descriptor, and the only way fs/ turns a
// path into a file. Every lookup is an openat2 from that descriptor with RESOLVE_BENEATH |
// RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV, and the caller does its I/O on the descriptor it got
// back: the descriptor is the check, a path string is never opened twice.
//
// Symlinks inside the home keep working. The kernel follows relative ones itself; an absolute
// link is refused by RESOLVE_BENEATH (EXDEV), and only then ConfinedDir walks the path one name
// at a time (each step an openat2 of a single name with RESOLVE_NO_SYMLINKS, so the kernel never
// follows anything on its own) and follows a link itself when its target is inside the home:
// relative targets from the link's own directory, absolute ones only when they name the home as
// the box sees it ("/home/NAME/..."). Anything else leading out is refused (FsError forbidden).
//
// Not thread-affine and const after construction: one ConfinedDir per account can serve many
// threads. Callers hold as_user() around each operation so permissions are the account's.
#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <string_view>

#include "fs/fs_identity.hpp"
#include "fs/home_path.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {

// A directory entry as a (directory descriptor, name) pair: what unlinkat, renameat2, mkdirat
// and linkat take, so an entry that is itself a symlink is acted on, not followed.
struct EntryRef {
  UniqueFd dir;      // O_PATH descriptor of the directory holding the entry
  std::string name;  // one component, never "." or ".."
};

class ConfinedDir {
 public:
  // `home_fd` is a directory descriptor (O_PATH is enough) of the home on the host; `box_home`
  // the same directory as the box sees it ("/home/NAME"); uid/gid the account's.
  ConfinedDir(UniqueFd home_fd, std::string_view box_home, uid_t uid, gid_t gid);
  // Opens `host_home` (a trusted path from the daemon's own configuration).
  static ConfinedDir open_home(const std::string& host_home, std::string_view box_home, uid_t uid, gid_t gid);

  // A user-supplied path, relative to `cwd` (any accepted form; "" = home); see home_path.hpp.
  HomePath path(std::string_view user_path, std::string_view cwd = {}) const;

  // Switches the calling thread to the account's fs identity until the guard goes away.
  FsIdentity as_user() const { return FsIdentity(uid_, gid_); }

  // Opens `p` with open(2) `flags` (O_CLOEXEC is added; `mode` only with O_CREAT), following
  // symlinks that stay in the home. Throws FsError (not_found, forbidden, ...).
  UniqueFd open(const HomePath& p, int flags, mode_t mode = 0) const;

  // The entry `p` names, not followed when it is a symlink (delete, move, listing). The
  // directories on the way are resolved as open() does. The home itself is no entry:
  // bad_request.
  EntryRef entry(const HomePath& p) const;

  // entry() of something that exists, its lstat in `st`; not_found when nothing is there.
  EntryRef existing_entry(const HomePath& p, struct stat& st) const;

  // The entry a write to `p` lands on: like entry(), but when `p` is a symlink it is followed
  // (inside the home only) to the entry it names, which need not exist yet.
  EntryRef write_target(const HomePath& p) const;

  // Creates `p` and its missing parents as directories owned by the caller's fs identity;
  // returns an O_PATH descriptor of `p`. An existing directory (or link to one) is fine.
  UniqueFd make_dirs(const HomePath& p) const;

  int fd() const { return home_.get(); }
  const std::string& box_home() const { return box_home_; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }

 private:
  // The component-wise walk described above. With follow_final, a final symlink is followed
  // too. Returns the entry reached; its name is "." when the path ends on a directory held.
  EntryRef walk(const HomePath& p, bool follow_final) const;

  UniqueFd home_;
  std::string box_home_;
  uid_t uid_;
  gid_t gid_;
};

// One step of every walk in fs/: opens the single name `name` in `dirfd` without following a
// symlink and without crossing a mount (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_XDEV and O_NOFOLLOW). With O_PATH a symlink yields a descriptor of the link itself;
// otherwise a symlink fails with ELOOP. Returns an empty UniqueFd with errno set on failure.
UniqueFd open_in_dir(int dirfd, std::string_view name, int flags, mode_t mode = 0);

}  // namespace agentbox
