#include "fs/confined_dir.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <deque>
#include <vector>

#include "fs/fs_error.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

// Whole-path lookups: the kernel follows symlinks but never out of the home, never through
// /proc magic links, never onto another mount.
constexpr uint64_t kResolvePath = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
// Single-name steps: the kernel follows nothing; links are ours to judge.
constexpr uint64_t kResolveStep = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV;
// As the kernel's own limit on links followed in one lookup.
constexpr int kMaxLinks = 40;
// openat2 answers EAGAIN when a concurrent rename might have let ".." escape; retrying is the
// documented answer, a few times at most.
constexpr int kMaxAgain = 8;

int openat2_fd(int dirfd, const char* path, int flags, mode_t mode, uint64_t resolve) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  if (flags & (O_CREAT | __O_TMPFILE)) how.mode = mode;
  how.resolve = resolve;
  for (int attempt = 0;; ++attempt) {
    long fd = ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if ((errno != EAGAIN && errno != EINTR) || attempt >= kMaxAgain) return -1;
  }
}

UniqueFd dup_fd(int fd) { return UniqueFd(static_cast<int>(check(::fcntl(fd, F_DUPFD_CLOEXEC, 0), "dup"))); }

std::deque<std::string> components(std::string_view rel) {
  auto parts = split_path(rel);
  return std::deque<std::string>(parts.begin(), parts.end());
}

std::string read_link(int link_fd, std::string_view shown) {
  std::string target(PATH_MAX, '\0');
  ssize_t n = ::readlinkat(link_fd, "", target.data(), target.size());
  fs_check(n, shown);
  target.resize(static_cast<size_t>(n));
  return target;
}

[[noreturn]] void refuse_outside(std::string_view shown) { throw_fs_errno(EXDEV, shown); }

std::string normalized_box_home(std::string_view box_home) {
  HomePath p = parse_home_path(box_home, "/");  // lexical clean-up only
  if (!box_home.starts_with('/') || p.is_home())
    throw Error("box home must be an absolute path below /: " + std::string(box_home));
  return "/" + p.rel;
}

}  // namespace

UniqueFd open_in_dir(int dirfd, std::string_view name, int flags, mode_t mode) {
  return UniqueFd(openat2_fd(dirfd, std::string(name).c_str(), flags | O_NOFOLLOW, mode, kResolveStep));
}

ConfinedDir::ConfinedDir(UniqueFd home_fd, std::string_view box_home, uid_t uid, gid_t gid)
    : home_(std::move(home_fd)), box_home_(normalized_box_home(box_home)), uid_(uid), gid_(gid) {}

ConfinedDir ConfinedDir::open_home(const std::string& host_home, std::string_view box_home, uid_t uid, gid_t gid) {
  UniqueFd fd(::open(host_home.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw sys_error("open(" + host_home + ")");
  return ConfinedDir(std::move(fd), box_home, uid, gid);
}

HomePath ConfinedDir::path(std::string_view user_path, std::string_view cwd) const {
  return parse_home_path(user_path, box_home_, cwd);
}

UniqueFd ConfinedDir::open(const HomePath& p, int flags, mode_t mode) const {
  int fd = openat2_fd(home_.get(), p.is_home() ? "." : p.rel.c_str(), flags, mode, kResolvePath);
  if (fd >= 0) return UniqueFd(fd);
  // EXDEV: a link left the home, or is an absolute link back into it; the walk tells them apart.
  if (errno != EXDEV) throw_fs_errno(errno, p.shown);
  EntryRef e = walk(p, /*follow_final=*/true);
  if (e.name == ".")
    fd = openat2_fd(e.dir.get(), ".", flags, mode, kResolveStep);
  else
    fd = openat2_fd(e.dir.get(), e.name.c_str(), flags | O_NOFOLLOW, mode, kResolveStep);
  // ELOOP here: the name turned into a symlink after the walk looked at it. Refuse.
  if (fd < 0) throw_fs_errno(errno, p.shown);
  return UniqueFd(fd);
}

EntryRef ConfinedDir::entry(const HomePath& p) const {
  if (p.is_home()) throw FsError(FsErrorKind::bad_request, "Not allowed on the home directory itself");
  return EntryRef{open(p.parent(box_home_), O_PATH | O_DIRECTORY), std::string(p.name())};
}

EntryRef ConfinedDir::existing_entry(const HomePath& p, struct stat& st) const {
  EntryRef e = entry(p);
  fs_check(::fstatat(e.dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW), p.shown);
  return e;
}

EntryRef ConfinedDir::write_target(const HomePath& p) const {
  EntryRef e = entry(p);
  struct stat st;
  if (::fstatat(e.dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode)) return e;
  e = walk(p, /*follow_final=*/true);
  if (e.name == ".") throw_fs_errno(EISDIR, p.shown);
  return e;
}

EntryRef ConfinedDir::walk(const HomePath& p, bool follow_final) const {
  std::vector<UniqueFd> dirs;  // directories entered below the home; the back one is current
  auto current = [&] { return dirs.empty() ? home_.get() : dirs.back().get(); };
  auto take_current = [&] {
    if (dirs.empty()) return dup_fd(home_.get());
    UniqueFd fd = std::move(dirs.back());
    dirs.pop_back();
    return fd;
  };
  std::deque<std::string> todo = components(p.rel);
  int links = 0;
  while (!todo.empty()) {
    std::string name = std::move(todo.front());
    todo.pop_front();
    if (name == "..") {  // only from a link target: p.rel has none
      if (dirs.empty()) refuse_outside(p.shown);
      dirs.pop_back();
      continue;
    }
    const bool last = todo.empty();
    UniqueFd fd = open_in_dir(current(), name, O_PATH);
    if (!fd) {
      if (last && errno == ENOENT) return EntryRef{take_current(), name};  // to be created
      throw_fs_errno(errno, p.shown);
    }
    struct stat st;
    fs_check(::fstat(fd.get(), &st), p.shown);
    if (S_ISLNK(st.st_mode)) {
      if (last && !follow_final) return EntryRef{take_current(), name};
      if (++links > kMaxLinks) throw_fs_errno(ELOOP, p.shown);
      std::string target = read_link(fd.get(), p.shown);
      std::deque<std::string> more;
      if (target.starts_with('/')) {
        HomePath inside;
        try {
          inside = parse_home_path(target, box_home_);
        } catch (const FsError&) {
          refuse_outside(p.shown);
        }
        dirs.clear();  // absolute: start again from the home
        more = components(inside.rel);
      } else {
        more = components(target);
      }
      todo.insert(todo.begin(), more.begin(), more.end());
      continue;
    }
    if (last) return EntryRef{take_current(), name};
    if (!S_ISDIR(st.st_mode)) throw_fs_errno(ENOTDIR, p.shown);
    dirs.push_back(std::move(fd));
  }
  // The path ended on a directory we hold (the home, or after a ".." from a link target).
  return EntryRef{take_current(), "."};
}

UniqueFd ConfinedDir::make_dirs(const HomePath& p) const {
  auto open_dir = [&](const HomePath& at) -> UniqueFd {
    try {
      return open(at, O_PATH | O_DIRECTORY);
    } catch (const FsError& e) {
      if (e.code() == ENOENT) return UniqueFd();
      if (e.code() == ENOTDIR) throw FsError(FsErrorKind::bad_request, "Not a directory: " + at.shown, ENOTDIR);
      throw;
    }
  };
  if (UniqueFd fd = open_dir(p)) return fd;
  // Create from the top down, each level from the descriptor of the one above.
  UniqueFd parent = dup_fd(home_.get());
  HomePath at{"", box_home_};
  for (const std::string& name : components(p.rel)) {
    at = at.child(name);
    UniqueFd fd = open_dir(at);
    if (!fd) {
      if (::mkdirat(parent.get(), name.c_str(), 0777) != 0 && errno != EEXIST) throw_fs_errno(errno, at.shown);
      fd = open_in_dir(parent.get(), name, O_PATH | O_DIRECTORY);
      if (!fd) {
        if (errno == ENOTDIR || errno == ELOOP)  // a file or dangling link is in the way
          throw FsError(FsErrorKind::bad_request, "Not a directory: " + at.shown, ENOTDIR);
        throw_fs_errno(errno, at.shown);
      }
    }
    parent = std::move(fd);
  }
  return parent;
}

}  // namespace agentbox
