#pragma once
// Reading directories for list, glob, grep and delete: the names in a directory descriptor, and
// what a listing shows for one entry.
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fs/confined_dir.hpp"

namespace agentbox {

struct DirEntry {
  std::string name;
  unsigned char type;  // DT_* from getdents; DT_UNKNOWN on filesystems that do not say
};

// The entries of the directory `dirfd` (O_PATH is enough), sorted by name, without "." and
// "..". Throws FsError (e.g. forbidden when the account may not read it).
std::vector<DirEntry> read_dir_entries(int dirfd, std::string_view shown);

// What a listing says about one entry. A symlink is described by what it points to when that
// is inside the home (so a link to a directory can be browsed); a link leading out of the home,
// or dangling, is described by the link itself as a "file" with symlink = true.
struct EntryInfo {
  std::string type;       // "file" or "directory"
  uint64_t size = 0;      // bytes (st_size)
  double modified = 0;    // mtime, Unix seconds with fraction (as Open Terminal's st_mtime)
  bool writable = false;  // the account may write it (access(2) with the account's fs identity)
  bool symlink = false;   // the entry itself is a symbolic link
};

// st_mtim as Unix seconds with fraction (Open Terminal's st_mtime).
double mtime_seconds(const struct stat& st);

// Describes `name` in `dirfd`, whose path is `entry_path` (used to follow a link from the home).
// Returns false when the entry vanished meanwhile. Call with the account's fs identity.
bool describe_entry(const ConfinedDir& home, int dirfd, std::string_view name, const HomePath& entry_path,
                    EntryInfo& out);

}  // namespace agentbox
