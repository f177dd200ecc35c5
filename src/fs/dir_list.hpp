#pragma once
// list_files: the entries of one directory of the home.
#include <string>
#include <vector>

#include "fs/confined_dir.hpp"
#include "fs/dir_entries.hpp"

namespace agentbox {

struct ListEntry {
  std::string name;
  EntryInfo info;
};

struct ListResult {
  std::string dir;                 // the directory as the box sees it
  std::vector<ListEntry> entries;  // sorted by name
};

// Lists `dir` (a symlink to a directory inside the home is followed). Throws FsError not_found
// "Directory not found: ..." when it is missing or not a directory.
ListResult list_dir(const ConfinedDir& home, const HomePath& dir);

// True when `dir` resolves (inside the home) to a directory: for setting a session cwd.
bool is_directory(const ConfinedDir& home, const HomePath& dir);

}  // namespace agentbox
