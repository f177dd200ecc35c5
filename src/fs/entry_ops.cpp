#include "fs/entry_ops.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/dir_entries.hpp"
#include "fs/fs_error.hpp"

namespace agentbox {
namespace {

// Empties the directory `dirfd` (shown for errors), depth levels below the entry deleted.
void remove_contents(int dirfd, const std::string& shown, int depth) {
  if (depth > kMaxRemoveDepth) throw FsError(FsErrorKind::bad_request, "Directory tree too deep to delete: " + shown);
  for (const DirEntry& d : read_dir_entries(dirfd, shown)) {
    const std::string child = shown + "/" + d.name;
    if (d.type == DT_DIR || d.type == DT_UNKNOWN) {
      // O_NOFOLLOW | O_DIRECTORY: if it became a symlink meanwhile this fails and the link is
      // unlinked below like a file.
      UniqueFd sub = open_in_dir(dirfd, d.name, O_PATH | O_DIRECTORY);
      if (sub) {
        remove_contents(sub.get(), child, depth + 1);
        fs_check(::unlinkat(dirfd, d.name.c_str(), AT_REMOVEDIR), child);
        continue;
      }
      if (errno != ENOTDIR && errno != ELOOP && errno != ENOENT) throw_fs_errno(errno, child);
    }
    if (::unlinkat(dirfd, d.name.c_str(), 0) != 0 && errno != ENOENT) throw_fs_errno(errno, child);
  }
}

}  // namespace

std::string make_dir(const ConfinedDir& home, const HomePath& p) {
  auto as_user = home.as_user();
  home.make_dirs(p);
  return p.shown;
}

void remove_tree_at(int dirfd, const std::string& name, const std::string& shown) {
  UniqueFd dir = open_in_dir(dirfd, name, O_PATH | O_DIRECTORY);
  if (!dir) {
    if (errno != ENOTDIR && errno != ELOOP) throw_fs_errno(errno, shown);
    fs_check(::unlinkat(dirfd, name.c_str(), 0), shown);
    return;
  }
  remove_contents(dir.get(), shown, 1);
  fs_check(::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR), shown);
}

RemoveResult remove_entry(const ConfinedDir& home, const HomePath& p) {
  if (p.is_home()) throw FsError(FsErrorKind::forbidden, "Refusing to delete the home directory");
  auto as_user = home.as_user();
  struct stat st;
  EntryRef e =
      when_missing(FsErrorKind::not_found, "Path not found", p.shown, [&] { return home.existing_entry(p, st); });
  remove_tree_at(e.dir.get(), e.name, p.shown);
  return RemoveResult{p.shown, S_ISDIR(st.st_mode) ? "directory" : "file"};
}

MoveResult move_entry(const ConfinedDir& home, const HomePath& source, const HomePath& destination) {
  if (source.is_home()) throw FsError(FsErrorKind::forbidden, "Refusing to move the home directory");
  if (destination.is_home()) throw FsError(FsErrorKind::conflict, "Destination already exists: " + destination.shown);
  auto as_user = home.as_user();
  struct stat st;
  EntryRef from = when_missing(FsErrorKind::not_found, "Source path not found", source.shown,
                               [&] { return home.existing_entry(source, st); });
  EntryRef to = when_missing(FsErrorKind::bad_request, "Destination parent directory not found", destination.shown,
                             [&] { return home.entry(destination); });
  if (::renameat2(from.dir.get(), from.name.c_str(), to.dir.get(), to.name.c_str(), RENAME_NOREPLACE) != 0) {
    switch (errno) {
      case EEXIST: throw FsError(FsErrorKind::conflict, "Destination already exists: " + destination.shown, EEXIST);
      case EINVAL:
        throw FsError(FsErrorKind::bad_request, "Cannot move a directory into itself: " + destination.shown, EINVAL);
      default: throw_fs_errno(errno, source.shown);
    }
  }
  return MoveResult{source.shown, destination.shown};
}

}  // namespace agentbox
