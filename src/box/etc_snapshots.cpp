#include "box/etc_snapshots.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "util/error.hpp"

namespace agentbox {
namespace {

constexpr const char* kNewPrefix = ".new-";    // a snapshot being made: renamed to its KEY when whole
constexpr int kKeyLength = 16;                 // hex digits of the 64-bit hash
constexpr time_t kAbandonedAfterSeconds = 60;  // a .new- directory this old was left by a crash

// FNV-1a, 64 bits: the inputs are root's own files, so only accidental collisions matter.
uint64_t fnv1a(std::string_view bytes, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// The snapshot's name: the fingerprint and the binary that makes it (another build may copy
// differently; its snapshots are its own).
std::string key_of(const std::string& fingerprint) {
  struct stat exe {};
  if (::stat("/proc/self/exe", &exe) != 0) throw sys_error("stat(/proc/self/exe)");
  const std::string self = fmt::format("exe {}:{} {} {}.{:09}\n", exe.st_dev, exe.st_ino, exe.st_size,
                                       exe.st_mtim.tv_sec, exe.st_mtim.tv_nsec);
  return fmt::format("{:016x}", fnv1a(fingerprint, fnv1a(self)));
}

bool is_key(std::string_view name) {
  return name.size() == kKeyLength && name.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// dir, made if missing; refused unless it is the caller's own and no one else may write to it
// (a snapshot planted there would become every box's /etc).
UniqueFd open_base(const std::string& dir) {
  UniqueFd base(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!base && errno == ENOENT) {
    for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
      const std::string part = dir.substr(0, slash);
      if (::mkdir(part.c_str(), 0755) == 0) {
        if (::chmod(part.c_str(), 0755) != 0) throw sys_error("chmod(" + part + ")");  // whatever the umask
      } else if (errno != EEXIST) {
        throw sys_error("mkdir(" + part + ")");
      }
      if (slash == std::string::npos) break;
    }
    base.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!base) throw sys_error("open(" + dir + ")");
  struct stat st {};
  if (::fstat(base.get(), &st) != 0) throw sys_error("stat(" + dir + ")");
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
    throw Error(dir + ": not the caller's own, or writable by others");
  return base;
}

// Removes dir/name while holding it exclusively: only a snapshot no box holds goes.
void remove_unheld(int base, const std::string& dir, const std::string& name) {
  UniqueFd fd(::openat(base, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return;  // gone, or held
  std::error_code ec;
  std::filesystem::remove_all(dir + "/" + name, ec);  // best effort: the next new snapshot tries again
}

// Every snapshot but `keep` that no box holds, and what a crash left half made.
void remove_old(int base, const std::string& dir, const std::string& keep) {
  UniqueFd list_fd(::dup(base));
  if (!list_fd) return;
  std::unique_ptr<DIR, int (*)(DIR*)> list(::fdopendir(list_fd.get()), ::closedir);
  if (!list) return;
  list_fd.release();  // the DIR owns it now
  std::vector<std::string> old;
  while (const dirent* e = ::readdir(list.get())) {
    const std::string_view name = e->d_name;
    if (name == keep) continue;
    if (is_key(name)) {
      old.emplace_back(name);
    } else if (name.starts_with(kNewPrefix)) {
      struct stat st {};
      if (::fstatat(base, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          ::time(nullptr) - st.st_mtime > kAbandonedAfterSeconds)
        old.emplace_back(name);
    }
  }
  for (const std::string& name : old) remove_unheld(base, dir, name);
}

// Makes the snapshot KEY: filled under a temporary name, renamed when whole (so a KEY that
// exists is complete), then the old ones go. Another process making the same KEY meanwhile wins
// or loses the rename; either way KEY exists afterwards.
void make(int base, const std::string& dir, const std::string& key, int host_etc, const BoxSpec& spec) {
  std::string path = dir + "/" + kNewPrefix + "XXXXXX";
  if (!::mkdtemp(path.data())) throw sys_error("mkdtemp(" + path + ")");
  const std::string name = path.substr(dir.size() + 1);
  try {
    if (::chmod(path.c_str(), 0755) != 0) throw sys_error("chmod(" + path + ")");
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throw sys_error("open(" + path + ")");
    mounts::fill_etc_dir(host_etc, fd.get(), spec);
    if (::renameat(base, name.c_str(), base, key.c_str()) != 0) {
      if (errno != EEXIST && errno != ENOTEMPTY) throw sys_error("rename(" + path + ", " + key + ")");
      std::error_code ec;
      std::filesystem::remove_all(path, ec);  // someone else's is there: it is the same tree
      return;
    }
  } catch (const Error&) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    throw;
  }
  remove_old(base, dir, key);
}

}  // namespace

mounts::EtcTree shared_etc_tree(const BoxSpec& spec, const std::string& dir, const std::string& host_etc) {
  try {
    const UniqueFd base = open_base(dir);
    UniqueFd host(::open(host_etc.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!host) throw sys_error("open(" + host_etc + ")");
    mounts::EtcFingerprint fingerprint = mounts::etc_fingerprint(host.get(), spec);
    const std::string key = key_of(fingerprint.text);
    // A snapshot may go between the open and the lock (an old one removed) or be missing: the
    // second round finds the one just made; a third means the directory keeps changing.
    for (int round = 0; round < 3; ++round) {
      UniqueFd snapshot(::openat(base.get(), key.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!snapshot) {
        if (errno != ENOENT) throw sys_error("open(" + dir + "/" + key + ")");
        make(base.get(), dir, key, host.get(), spec);
        continue;
      }
      if (::flock(snapshot.get(), LOCK_SH | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) throw sys_error("flock(" + dir + "/" + key + ")");
        continue;  // being removed
      }
      struct stat held {
      }, named{};
      if (::fstat(snapshot.get(), &held) != 0 || ::fstatat(base.get(), key.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
          held.st_ino != named.st_ino || held.st_dev != named.st_dev)
        continue;  // removed before the lock was ours
      UniqueFd tree(::open_tree(snapshot.get(), "", AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
      if (!tree) throw sys_error("open_tree(" + dir + "/" + key + ")");
      mount_attr attr{};
      attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
      if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
        throw sys_error("mount_setattr(" + dir + "/" + key + ")");
      return {std::move(tree), std::move(fingerprint.dirs), std::move(snapshot)};
    }
    throw Error(dir + ": the snapshot kept going away");
  } catch (const Error& e) {
    throw e.wrap("/etc snapshot");
  }
}

}  // namespace agentbox
