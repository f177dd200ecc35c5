#include "backup/mirror_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <unordered_set>

#include <fmt/format.h>

#include "backup/mirror_layout.hpp"
#include "backup/mirror_record.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::backup {
namespace {

constexpr size_t kMaxErrorMessages = 20;
constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

struct DirEntry {
  std::string name;
  unsigned char type;  // DT_*; DT_UNKNOWN on filesystems that do not say
};

// The entries of an open directory, "." and ".." left out, read with getdents64 in large
// batches (readdir's 32 KiB buffer costs twice the calls on a directory of many files).
std::vector<DirEntry> list_dir(int fd) {
  struct LinuxDirent64 {
    ino64_t d_ino;
    off64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
  };
  std::vector<DirEntry> out;
  alignas(LinuxDirent64) static thread_local char buf[128 * 1024];
  if (::lseek(fd, 0, SEEK_SET) == -1) throw sys_error("lseek");
  for (;;) {
    long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n == -1) throw sys_error("getdents64");
    if (n == 0) return out;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
      off += d->d_reclen;
      std::string_view name(d->d_name);
      if (name == "." || name == "..") continue;
      out.push_back(DirEntry{std::string(name), d->d_type});
    }
  }
}

std::string join(const std::string& rel, std::string_view name) {
  if (rel.empty()) return std::string(name);
  std::string out = rel;
  out += '/';
  out += name;
  return out;
}

bool same_time(const timespec& a, const timespec& b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

// Copies from `in` to `out` until the end of `in`: copy_file_range (reflinks or in-kernel copy),
// else sendfile, else read/write. Returns the bytes copied.
uint64_t copy_bytes(int in, int out) {
  uint64_t total = 0;
  bool kernel_copy = true;
  for (;;) {
    ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, 1 << 30, 0);
    if (n > 0) {
      total += static_cast<uint64_t>(n);
      continue;
    }
    if (n == 0) return total;
    if (errno == EINTR) continue;
    if (total == 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
      kernel_copy = false;
      break;
    }
    throw sys_error("copy_file_range");
  }
  (void)kernel_copy;
  for (;;) {
    ssize_t n = ::sendfile(out, in, nullptr, 1 << 30);
    if (n > 0) {
      total += static_cast<uint64_t>(n);
      continue;
    }
    if (n == 0) return total;
    if (errno == EINTR) continue;
    if (total == 0 && (errno == EINVAL || errno == ENOSYS)) break;
    throw sys_error("sendfile");
  }
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n == 0) return total;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sys_error("read");
    }
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(out, buf + done, static_cast<size_t>(n - done));
      if (w < 0) {
        if (errno == EINTR) continue;
        throw sys_error("write");
      }
      done += w;
    }
    total += static_cast<uint64_t>(n);
  }
}

std::string read_link(int dirfd, const std::string& name, off_t size_hint) {
  std::string target(static_cast<size_t>(size_hint > 0 ? size_hint : 64) + 1, '\0');
  for (;;) {
    ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
    if (n < 0) throw sys_error("readlink");
    if (static_cast<size_t>(n) < target.size()) {
      target.resize(static_cast<size_t>(n));
      return target;
    }
    target.resize(target.size() * 2);
  }
}

// A temporary entry removed when the guard goes, unless released (renamed into place).
class TempEntry {
 public:
  TempEntry(int dirfd, std::string name) : dirfd_(dirfd), name_(std::move(name)) {}
  ~TempEntry() {
    if (!name_.empty()) ::unlinkat(dirfd_, name_.c_str(), 0);
  }
  TempEntry(const TempEntry&) = delete;
  TempEntry& operator=(const TempEntry&) = delete;
  void release() { name_.clear(); }

 private:
  int dirfd_;
  std::string name_;
};

// Owner, mode and mtime of a copy made equal to its source's (a directory's after its
// entries, whose renames change its mtime).
void match_metadata(int fd, const struct stat& src) {
  struct stat cur;
  check(::fstat(fd, &cur), "fstat");
  if (cur.st_uid != src.st_uid || cur.st_gid != src.st_gid) check(::fchown(fd, src.st_uid, src.st_gid), "fchown");
  if ((cur.st_mode & 07777) != (src.st_mode & 07777)) check(::fchmod(fd, src.st_mode & 07777), "fchmod");
  if (!same_time(cur.st_mtim, src.st_mtim)) {
    timespec times[2] = {src.st_atim, src.st_mtim};
    check(::futimens(fd, times), "futimens");
  }
}

class TreeMirror {
 public:
  TreeMirror(int account_fd, std::string_view date, const MirrorTreeOptions& options, MirrorStats& stats)
      : account_fd_(account_fd), date_(date), options_(options), stats_(stats) {
    uint32_t r = 0;
    if (::getrandom(&r, sizeof r, 0) != sizeof r) r = static_cast<uint32_t>(::getpid());
    temp_stem_ = fmt::format("{}{:08x}-", kTempPrefix, r);
  }

  void mirror_dir(int sfd, int dfd, const std::string& rel);

 private:
  void mirror_entry(int sfd, int dfd, const std::string& rel, const std::string& name, const struct stat& st,
                    const struct stat* dst);
  void copy_file(int sfd, int dfd, const std::string& rel, const std::string& name, const struct stat& st,
                 const struct stat* dst);
  void copy_symlink(int sfd, int dfd, const std::string& rel, const std::string& name, const struct stat& st,
                    const struct stat* dst);
  void mirror_subdir(int sfd, int dfd, const std::string& rel, const std::string& name, const struct stat* dst);
  // Puts the mirror's `name` (in dfd, at rel) under .deleted/DATE/rel: moved, or for a file
  // about to be replaced hard-linked, so the mirror never lacks the name meanwhile.
  void keep(int dfd, const std::string& rel, const std::string& name, bool move);
  UniqueFd deleted_dir(const std::string& rel);
  std::string temp_name() { return temp_stem_ + std::to_string(++temp_count_); }

  int account_fd_;
  std::string date_;
  const MirrorTreeOptions& options_;
  MirrorStats& stats_;
  std::string temp_stem_;
  uint64_t temp_count_ = 0;
  UniqueFd date_dir_;  // .deleted/DATE, opened on first use
};

void TreeMirror::mirror_dir(int sfd, int dfd, const std::string& rel) {
  std::vector<DirEntry> src, dst;
  try {
    src = list_dir(sfd);
    dst = list_dir(dfd);
  } catch (const Error& e) {
    // Unreadable: nothing here is judged deleted.
    stats_.error(fmt::format("{}: {}", rel.empty() ? "." : rel, e.what()));
    return;
  }
  std::unordered_set<std::string_view> src_names, dst_names;
  src_names.reserve(src.size());
  dst_names.reserve(dst.size());
  for (const DirEntry& e : src) src_names.insert(e.name);
  for (const DirEntry& e : dst) {
    if (src_names.contains(e.name)) {
      dst_names.insert(e.name);
      continue;
    }
    try {
      if (std::string_view(e.name).starts_with(kTempPrefix))
        remove_tree(dfd, e.name);  // left by a pass that was killed
      else
        keep(dfd, rel, e.name, /*move=*/true);
    } catch (const Error& err) {
      stats_.error(fmt::format("{}: {}", join(rel, e.name), err.what()));
    }
  }
  for (const DirEntry& e : src) {
    if (options_.stop && options_.stop->load(std::memory_order_relaxed)) return;
    if (options_.skip_temporaries && std::string_view(e.name).starts_with(kTempPrefix)) continue;
    try {
      struct stat st;
      if (::fstatat(sfd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // gone since the listing: the next pass sees it
        throw sys_error("fstatat");
      }
      struct stat dst_st;
      bool have_dst = dst_names.contains(e.name) && ::fstatat(dfd, e.name.c_str(), &dst_st, AT_SYMLINK_NOFOLLOW) == 0;
      mirror_entry(sfd, dfd, rel, e.name, st, have_dst ? &dst_st : nullptr);
    } catch (const Error& err) {
      stats_.error(fmt::format("{}: {}", join(rel, e.name), err.what()));
    }
  }
}

void TreeMirror::mirror_entry(int sfd, int dfd, const std::string& rel, const std::string& name, const struct stat& st,
                              const struct stat* dst) {
  if (S_ISREG(st.st_mode)) return copy_file(sfd, dfd, rel, name, st, dst);
  if (S_ISDIR(st.st_mode)) return mirror_subdir(sfd, dfd, rel, name, dst);
  if (S_ISLNK(st.st_mode)) return copy_symlink(sfd, dfd, rel, name, st, dst);
  // A socket, fifo or device is not copied; what the mirror had under that name is gone from
  // the home, so it is kept like a deletion.
  if (dst) keep(dfd, rel, name, /*move=*/true);
}

void TreeMirror::copy_file(int sfd, int dfd, const std::string& rel, const std::string& name, const struct stat& st,
                           const struct stat* dst) {
  if (dst && S_ISREG(dst->st_mode) && dst->st_size == st.st_size && same_time(dst->st_mtim, st.st_mtim)) {
    if (dst->st_uid != st.st_uid || dst->st_gid != st.st_gid)
      check(::fchownat(dfd, name.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW), "fchownat");
    if ((dst->st_mode & 07777) != (st.st_mode & 07777))
      check(::fchmodat(dfd, name.c_str(), st.st_mode & 07777, 0), "fchmodat");
    ++stats_.unchanged;
    return;
  }
  // O_NONBLOCK: a fifo swapped in since the fstatat must not block the pass; O_NOATIME: the
  // mirror leaves the home's atimes as they were.
  UniqueFd in(::openat(sfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOATIME));
  if (!in && errno == EPERM) in.reset(::openat(sfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!in) {
    if (errno == ENOENT || errno == ELOOP) return;  // gone or replaced by a link: next pass
    throw sys_error("open");
  }
  struct stat before;
  check(::fstat(in.get(), &before), "fstat");
  if (!S_ISREG(before.st_mode)) return;

  std::string tmp = temp_name();
  UniqueFd out(::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) throw sys_error("open(" + tmp + ")");
  TempEntry guard(dfd, tmp);
  uint64_t copied = copy_bytes(in.get(), out.get());
  check(::fchown(out.get(), before.st_uid, before.st_gid), "fchown");
  check(::fchmod(out.get(), before.st_mode & 07777), "fchmod");  // after chown, which clears set-id bits
  timespec times[2] = {before.st_atim, before.st_mtim};
  check(::futimens(out.get(), times), "futimens");
  if (options_.after_copy) options_.after_copy(join(rel, name));

  struct stat after;
  check(::fstat(in.get(), &after), "fstat");
  if (after.st_size != before.st_size || !same_time(after.st_mtim, before.st_mtim) ||
      !same_time(after.st_ctim, before.st_ctim) || copied != static_cast<uint64_t>(before.st_size)) {
    ++stats_.changing;  // written to while copied: the old copy stays, the guard drops this one
    return;
  }
  if (dst) keep(dfd, rel, name, /*move=*/S_ISDIR(dst->st_mode));
  check(::renameat(dfd, tmp.c_str(), dfd, name.c_str()), "rename");
  guard.release();
  ++stats_.files_copied;
  stats_.bytes_copied += copied;
}

void TreeMirror::copy_symlink(int sfd, int dfd, const std::string& rel, const std::string& name, const struct stat& st,
                              const struct stat* dst) {
  std::string target = read_link(sfd, name, st.st_size);
  if (dst && S_ISLNK(dst->st_mode) && read_link(dfd, name, dst->st_size) == target) {
    ++stats_.unchanged;
    return;
  }
  std::string tmp = temp_name();
  check(::symlinkat(target.c_str(), dfd, tmp.c_str()), "symlink");
  TempEntry guard(dfd, tmp);
  check(::fchownat(dfd, tmp.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW), "fchownat");
  timespec times[2] = {st.st_atim, st.st_mtim};
  check(::utimensat(dfd, tmp.c_str(), times, AT_SYMLINK_NOFOLLOW), "utimensat");
  if (dst) keep(dfd, rel, name, /*move=*/S_ISDIR(dst->st_mode));
  check(::renameat(dfd, tmp.c_str(), dfd, name.c_str()), "rename");
  guard.release();
  ++stats_.files_copied;
}

void TreeMirror::mirror_subdir(int sfd, int dfd, const std::string& rel, const std::string& name,
                               const struct stat* dst) {
  UniqueFd s(::openat(sfd, name.c_str(), kDirFlags));
  if (!s) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return;  // replaced since: next pass
    throw sys_error("open");
  }
  struct stat st;  // of what was opened, not of what the name held a moment before
  check(::fstat(s.get(), &st), "fstat");
  if (dst && !S_ISDIR(dst->st_mode)) {
    keep(dfd, rel, name, /*move=*/true);
    dst = nullptr;
  }
  if (!dst && ::mkdirat(dfd, name.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir");
  UniqueFd d(::openat(dfd, name.c_str(), kDirFlags));
  if (!d) throw sys_error("open mirror directory");
  const std::string sub = join(rel, name);
  mirror_dir(s.get(), d.get(), sub);
  match_metadata(d.get(), st);
}

UniqueFd TreeMirror::deleted_dir(const std::string& rel) {
  // mkdir + open of one component under `at`; something else of that name is replaced.
  auto open_or_make = [](int at, const std::string& comp) {
    UniqueFd fd(::openat(at, comp.c_str(), kDirFlags));
    if (!fd && (errno == ENOTDIR || errno == ELOOP)) remove_tree(at, comp);
    if (!fd && ::mkdirat(at, comp.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + comp + ")");
    if (!fd) fd.reset(::openat(at, comp.c_str(), kDirFlags));
    if (!fd) throw sys_error("open(" + comp + ")");
    return fd;
  };
  if (!date_dir_) {
    UniqueFd deleted = open_or_make(account_fd_, std::string(kDeletedDir));
    date_dir_ = open_or_make(deleted.get(), date_);
    if (!options_.kept_under.empty()) date_dir_ = open_or_make(date_dir_.get(), std::string(options_.kept_under));
  }
  UniqueFd cur(::fcntl(date_dir_.get(), F_DUPFD_CLOEXEC, 0));
  if (!cur) throw sys_error("dup");
  size_t start = 0;
  while (start < rel.size()) {
    size_t slash = rel.find('/', start);
    if (slash == std::string::npos) slash = rel.size();
    cur = open_or_make(cur.get(), rel.substr(start, slash - start));
    start = slash + 1;
  }
  return cur;
}

void TreeMirror::keep(int dfd, const std::string& rel, const std::string& name, bool move) {
  UniqueFd del = deleted_dir(rel);
  auto attempt = [&] {
    return move ? ::renameat(dfd, name.c_str(), del.get(), name.c_str())
                : ::linkat(dfd, name.c_str(), del.get(), name.c_str(), 0);
  };
  if (attempt() != 0) {
    // Something of that name was already kept today: the later version wins.
    if (errno != EEXIST && errno != ENOTEMPTY && errno != EISDIR && errno != ENOTDIR)
      throw sys_error(move ? "rename into .deleted" : "link into .deleted");
    remove_tree(del.get(), name);
    check(attempt(), move ? "rename into .deleted" : "link into .deleted");
  }
  ++stats_.kept_deleted;
}

// "YYYY-MM-DD" days before `date`.
std::string days_before(std::string_view date, int days) {
  std::tm tm{};
  tm.tm_year = std::stoi(std::string(date.substr(0, 4))) - 1900;
  tm.tm_mon = std::stoi(std::string(date.substr(5, 2))) - 1;
  tm.tm_mday = std::stoi(std::string(date.substr(8, 2)));
  std::time_t t = ::timegm(&tm) - static_cast<std::time_t>(days) * 86400;
  return utc_date(std::chrono::system_clock::from_time_t(t));
}

}  // namespace

void MirrorStats::add(const MirrorStats& o) {
  files_copied += o.files_copied;
  bytes_copied += o.bytes_copied;
  unchanged += o.unchanged;
  kept_deleted += o.kept_deleted;
  changing += o.changing;
  errors += o.errors;
  for (const std::string& m : o.error_messages)
    if (error_messages.size() < kMaxErrorMessages) error_messages.push_back(m);
}

void MirrorStats::error(std::string message) {
  ++errors;
  if (error_messages.size() < kMaxErrorMessages) error_messages.push_back(std::move(message));
}

MirrorStats mirror_tree(int src_dir_fd, int account_dir_fd, std::string_view date, const MirrorTreeOptions& options) {
  MirrorStats stats;
  UniqueFd src(::openat(src_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!src) throw sys_error("open home");
  struct stat root;
  check(::fstat(src.get(), &root), "fstat home");
  const std::string home(options.copy);
  UniqueFd dst(::openat(account_dir_fd, home.c_str(), kDirFlags));
  if (!dst) {
    if (errno == ENOTDIR || errno == ELOOP) remove_tree(account_dir_fd, home);
    if (::mkdirat(account_dir_fd, home.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + home + ")");
    dst.reset(::openat(account_dir_fd, home.c_str(), kDirFlags));
    if (!dst) throw sys_error("open(" + home + ")");
  }
  TreeMirror(account_dir_fd, date, options, stats).mirror_dir(src.get(), dst.get(), "");
  try {
    match_metadata(dst.get(), root);
  } catch (const Error& e) {
    stats.error(fmt::format(".: {}", e.what()));
  }
  return stats;
}

void purge_deleted(int account_dir_fd, std::string_view today, int keep_days, MirrorStats& stats) {
  UniqueFd deleted(::openat(account_dir_fd, std::string(kDeletedDir).c_str(), kDirFlags));
  if (!deleted) {
    if (errno != ENOENT) stats.error(fmt::format("{}: {}", kDeletedDir, std::strerror(errno)));
    return;
  }
  const std::string cutoff = days_before(today, keep_days);
  try {
    for (const DirEntry& e : list_dir(deleted.get()))
      if (is_date_name(e.name) && e.name <= cutoff) remove_tree(deleted.get(), e.name);
  } catch (const Error& e) {
    stats.error(fmt::format("{}: {}", kDeletedDir, e.what()));
  }
}

void put_away_gone_accounts(int mirror_root_fd, const std::set<std::string>& live, std::string_view today,
                            int keep_days, MirrorStats& stats, const std::function<bool(const std::string&)>& gone) {
  std::vector<DirEntry> entries;
  try {
    entries = list_dir(mirror_root_fd);
  } catch (const Error& e) {
    return stats.error(fmt::format("mirror: {}", e.what()));
  }
  const std::string home(kHomeDir), workspaces(kWorkspacesDir), deleted(kDeletedDir), day(today);
  for (const DirEntry& e : entries) {
    if (e.name.starts_with('.') || live.contains(e.name)) continue;
    try {
      UniqueFd account(::openat(mirror_root_fd, e.name.c_str(), kDirFlags));
      if (!account) continue;  // not a directory of ours
      struct stat st {};
      const bool has_home = ::fstatat(account.get(), home.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      const bool has_workspaces = ::fstatat(account.get(), workspaces.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      if ((has_home || has_workspaces) && gone && !gone(e.name))
        continue;  // not deleted here: kept whole for a restore
      if (has_home || has_workspaces) {
        if (::mkdirat(account.get(), deleted.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(.deleted)");
        const std::string into = deleted + "/" + day;
        if (::mkdirat(account.get(), into.c_str(), 0700) != 0 && errno != EEXIST)
          throw sys_error("mkdir(" + into + ")");
        // `what` into .deleted/DAY/as, as-2, as-3, ... (the first name free).
        auto put_away = [&](const std::string& what, std::string_view as) {
          const std::string first = into + "/" + std::string(as);
          std::string target = first;
          for (int n = 2;
               ::renameat2(account.get(), what.c_str(), account.get(), target.c_str(), RENAME_NOREPLACE) != 0; ++n) {
            if (errno != EEXIST || n > 100) throw sys_error("rename(" + what + ", " + target + ")");
            target = first + "-" + std::to_string(n);
          }
        };
        if (has_home) put_away(home, kPutAwayHome);
        if (has_workspaces) put_away(workspaces, kKeptWorkspaces);
      }
      purge_deleted(account.get(), today, keep_days, stats);
      // Nothing kept any more: the account's directory goes.
      if (::unlinkat(account.get(), deleted.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) {
        ::unlinkat(account.get(), std::string(kRecordFile).c_str(), 0);
        ::unlinkat(mirror_root_fd, e.name.c_str(), AT_REMOVEDIR);
      }
    } catch (const Error& err) {
      stats.error(fmt::format("{}: {}", e.name, err.what()));
    }
  }
}

void remove_tree(int dirfd, const std::string& name) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) throw sys_error("unlink(" + name + ")");
  UniqueFd d(::openat(dirfd, name.c_str(), kDirFlags));
  if (!d) throw sys_error("open(" + name + ")");
  for (const DirEntry& e : list_dir(d.get())) remove_tree(d.get(), e.name);
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) throw sys_error("rmdir(" + name + ")");
}

}  // namespace agentbox::backup
