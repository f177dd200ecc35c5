#include "fs/home_restore.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "fs/atomic_file.hpp"
#include "fs/fs_error.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/random_hex.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

constexpr size_t kMaxErrors = 20;

std::string temp_link_name() { return ".agentbox-" + random_hex(8) + ".tmp"; }

class Restorer {
 public:
  explicit Restorer(const ConfinedDir& home) : home_(home) {}

  void entry(int src_dir, const std::string& name, const HomePath& target, bool in_tree);
  RestoreResult result;

 private:
  void file(int src_dir, const std::string& name, const struct stat& st, const HomePath& target);
  void symlink(int src_dir, const std::string& name, const struct stat& st, const HomePath& target);
  void directory(int src_dir, const std::string& name, const HomePath& target);

  const ConfinedDir& home_;
};

void Restorer::entry(int src_dir, const std::string& name, const HomePath& target, bool in_tree) {
  try {
    struct stat st;
    if (::fstatat(src_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_fs_errno(errno, target.shown);
    if (target.is_home() && !S_ISDIR(st.st_mode))
      throw FsError(FsErrorKind::bad_request, "Only a directory can be restored over the home");
    if (S_ISREG(st.st_mode)) return file(src_dir, name, st, target);
    if (S_ISLNK(st.st_mode)) return symlink(src_dir, name, st, target);
    if (S_ISDIR(st.st_mode)) return directory(src_dir, name, target);
  } catch (const Error& e) {
    if (!in_tree) throw;
    if (result.errors.size() < kMaxErrors) result.errors.push_back(target.shown + ": " + e.what());
  }
}

void Restorer::file(int src_dir, const std::string& name, const struct stat& st, const HomePath& target) {
  // Opened as the daemon (the saved copy is not the account's to read), written as the account.
  UniqueFd in(::openat(src_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!in) throw_fs_errno(errno, target.shown);
  FsIdentity as_user = home_.as_user();
  home_.make_dirs(target.parent(home_.box_home()));
  AtomicFile out(home_.entry(target), target.shown);
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sys_error("read saved copy of " + target.shown);
    }
    out.write(std::string_view(buf, static_cast<size_t>(n)));
  }
  out.set_mode(st.st_mode & 07777);
  out.set_times(st.st_atim, st.st_mtim);
  out.commit();
  ++result.files;
  result.bytes += out.size();
}

void Restorer::symlink(int src_dir, const std::string& name, const struct stat& st, const HomePath& target) {
  std::string link(static_cast<size_t>(st.st_size) + 1, '\0');
  ssize_t n = ::readlinkat(src_dir, name.c_str(), link.data(), link.size());
  if (n < 0 || static_cast<size_t>(n) >= link.size()) throw sys_error("readlink saved copy of " + target.shown);
  link.resize(static_cast<size_t>(n));
  FsIdentity as_user = home_.as_user();
  home_.make_dirs(target.parent(home_.box_home()));
  EntryRef at = home_.entry(target);
  // Made under a temporary name and renamed over the entry: the same atomic replacement as a file's.
  std::string tmp = temp_link_name();
  fs_check(::symlinkat(link.c_str(), at.dir.get(), tmp.c_str()), target.shown);
  if (::renameat(at.dir.get(), tmp.c_str(), at.dir.get(), at.name.c_str()) != 0) {
    int err = errno;
    ::unlinkat(at.dir.get(), tmp.c_str(), 0);
    throw_fs_errno(err, target.shown);
  }
  ++result.files;
}

void Restorer::directory(int src_dir, const std::string& name, const HomePath& target) {
  UniqueFd src(::openat(src_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!src) throw_fs_errno(errno, target.shown);
  struct stat st;
  check(::fstat(src.get(), &st), "fstat");
  if (!target.is_home()) {
    FsIdentity as_user = home_.as_user();
    home_.make_dirs(target);
    ++result.dirs;
  }
  for (const std::string& child : dir_names_at(src.get())) entry(src.get(), child, target.child(child), true);
  if (target.is_home()) return;  // the home's own mode is the daemon's to set, not a backup's
  FsIdentity as_user = home_.as_user();
  UniqueFd dir = home_.open(target, O_RDONLY | O_DIRECTORY);
  fs_check(::fchmod(dir.get(), st.st_mode & 07777), target.shown);
}

}  // namespace

RestoreResult restore_into_home(const ConfinedDir& home, int source_dir_fd, const std::string& source_name,
                                const HomePath& target) {
  Restorer r(home);
  r.entry(source_dir_fd, source_name, target, /*in_tree=*/false);
  return std::move(r.result);
}

}  // namespace agentbox
