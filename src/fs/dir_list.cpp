#include "fs/dir_list.hpp"

#include <fcntl.h>

#include "fs/fs_error.hpp"

namespace agentbox {

ListResult list_dir(const ConfinedDir& home, const HomePath& dir) {
  auto as_user = home.as_user();
  UniqueFd fd = when_missing(FsErrorKind::not_found, "Directory not found", dir.shown,
                             [&] { return home.open(dir, O_PATH | O_DIRECTORY); });
  ListResult out{dir.shown, {}};
  for (auto& d : read_dir_entries(fd.get(), dir.shown)) {
    ListEntry entry{std::move(d.name), {}};
    if (describe_entry(home, fd.get(), entry.name, dir.child(entry.name), entry.info))
      out.entries.push_back(std::move(entry));
  }
  return out;
}

bool is_directory(const ConfinedDir& home, const HomePath& dir) {
  auto as_user = home.as_user();
  try {
    home.open(dir, O_PATH | O_DIRECTORY);
    return true;
  } catch (const FsError&) {
    return false;
  }
}

}  // namespace agentbox
