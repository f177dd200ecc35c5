#include "fs/tree_walk.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <vector>

#include "fs/confined_dir.hpp"
#include "fs/fs_error.hpp"

namespace agentbox {
namespace {

unsigned char entry_type(int dirfd, const DirEntry& d) {
  if (d.type != DT_UNKNOWN) return d.type;
  struct stat st;
  if (::fstatat(dirfd, d.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return DT_UNKNOWN;
  if (S_ISDIR(st.st_mode)) return DT_DIR;
  if (S_ISREG(st.st_mode)) return DT_REG;
  if (S_ISLNK(st.st_mode)) return DT_LNK;
  return DT_UNKNOWN;
}

struct Walker {
  const WalkLimits& limits;
  const std::function<Visit(const WalkEntry&)>& visit;
  uint64_t seen = 0;
  bool cut = false;

  // Returns false to stop the whole walk.
  bool dir(int dirfd, const std::string& shown, const std::string& rel, int depth) {
    std::vector<DirEntry> entries;
    try {
      entries = read_dir_entries(dirfd, shown);
    } catch (const FsError&) {
      return true;  // unreadable for the account: nothing to report from it
    }
    std::vector<const DirEntry*> subdirs;
    for (const DirEntry& d : entries) {
      if (++seen > limits.max_entries) {
        cut = true;
        return false;
      }
      std::string child = rel.empty() ? d.name : rel + "/" + d.name;
      unsigned char type = entry_type(dirfd, d);
      Visit v = visit(WalkEntry{dirfd, d, child, type});
      if (v == Visit::stop) return false;
      if (type == DT_DIR && v == Visit::next) subdirs.push_back(&d);
    }
    for (const DirEntry* d : subdirs) {
      if (depth >= limits.max_depth) {
        cut = true;
        break;
      }
      UniqueFd sub = open_in_dir(dirfd, d->name, O_PATH | O_DIRECTORY);
      if (!sub) continue;  // gone, or turned into a link meanwhile: never followed
      std::string child = rel.empty() ? d->name : rel + "/" + d->name;
      if (!dir(sub.get(), shown + "/" + d->name, child, depth + 1)) return false;
    }
    return true;
  }
};

}  // namespace

void check_max_results(int max_results) {
  if (max_results < 1 || max_results > kMaxSearchResults)
    throw FsError(FsErrorKind::bad_request, "max_results must be between 1 and " + std::to_string(kMaxSearchResults));
}

bool walk_tree(int dirfd, const std::string& shown, const WalkLimits& limits,
               const std::function<Visit(const WalkEntry&)>& visit) {
  Walker w{limits, visit};
  w.dir(dirfd, shown, "", 0);
  return !w.cut;
}

}  // namespace agentbox
