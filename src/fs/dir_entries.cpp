#include "fs/dir_entries.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "fs/fs_error.hpp"

namespace agentbox {
namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

void fill_from_stat(const struct stat& st, EntryInfo& out) {
  out.type = S_ISDIR(st.st_mode) ? "directory" : "file";
  out.size = static_cast<uint64_t>(st.st_size);
  out.modified = mtime_seconds(st);
}

}  // namespace

double mtime_seconds(const struct stat& st) {
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
}

std::vector<DirEntry> read_dir_entries(int dirfd, std::string_view shown) {
  // A readable descriptor of the same directory (dirfd may be O_PATH): "." names it, no lookup.
  UniqueFd fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw_fs_errno(errno, shown);
  std::unique_ptr<DIR, DirCloser> dir(::fdopendir(fd.get()));
  if (!dir) throw_fs_errno(errno, shown);
  fd.release();  // now owned by dir
  std::vector<DirEntry> out;
  for (;;) {
    errno = 0;
    struct dirent* d = ::readdir(dir.get());
    if (!d) {
      if (errno != 0) throw_fs_errno(errno, shown);
      break;
    }
    std::string_view name = d->d_name;
    if (name == "." || name == "..") continue;
    out.push_back(DirEntry{std::string(name), d->d_type});
  }
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

bool describe_entry(const ConfinedDir& home, int dirfd, std::string_view name, const HomePath& entry_path,
                    EntryInfo& out) {
  UniqueFd fd = open_in_dir(dirfd, name, O_PATH);
  if (!fd) return false;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return false;
  out = EntryInfo{};
  out.symlink = S_ISLNK(st.st_mode);
  if (out.symlink) {
    try {
      UniqueFd target = home.open(entry_path, O_PATH);
      struct stat tst;
      if (::fstat(target.get(), &tst) == 0) {
        fd = std::move(target);
        st = tst;
      }
    } catch (const FsError&) {
      // Leads out of the home, or dangles: describe the link itself.
    }
  }
  fill_from_stat(st, out);
  // The link itself is never "writable" in a useful sense; its target (inside) is checked.
  out.writable = !S_ISLNK(st.st_mode) && ::faccessat(fd.get(), "", W_OK, AT_EACCESS | AT_EMPTY_PATH) == 0;
  return true;
}

}  // namespace agentbox
