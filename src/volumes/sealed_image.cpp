#include "volumes/sealed_image.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/run_program.hpp"
#include "volumes/loop_device.hpp"

namespace agentbox {
namespace {

namespace stdfs = std::filesystem;

// Part of every content key: a new recipe (options, layout) makes new images.
constexpr std::string_view kRecipe = "agentbox sealed image 1";
constexpr uint64_t kBlock = 4096;
constexpr uint64_t kMinImageBytes = 16ull << 20;

// What an image is made from, and its key: the source's entries as lstat sees them (path,
// type and mode, owner, size, modification time, link target), sorted by path.
struct Content {
  bool dir = false;
  uint64_t bytes = 0;    // blocks the entries take, rounded up
  uint64_t entries = 0;  // inodes they need
  std::string key;       // 16 hex digits
};

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

Content content_of(const std::string& source) {
  struct stat top {};
  if (::stat(source.c_str(), &top) != 0) throw sys_error("stat(" + source + ")");
  if (!S_ISREG(top.st_mode) && !S_ISDIR(top.st_mode)) throw Error(source + ": neither a file nor a directory");
  Content c;
  c.dir = S_ISDIR(top.st_mode);
  std::string signature = std::string(kRecipe) + "\n" + source + "\n";
  const auto add = [&](const std::string& rel, const struct stat& st) {
    std::string link;
    if (S_ISLNK(st.st_mode)) link = stdfs::read_symlink(source + "/" + rel).string();
    signature += fmt::format("{}:{} {:o} {}:{} {} {}.{} {}\n", rel.size(), rel, st.st_mode, st.st_uid, st.st_gid,
                             st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, link);
    c.bytes += (static_cast<uint64_t>(st.st_size) + kBlock - 1) / kBlock * kBlock + kBlock;
    ++c.entries;
  };
  add("", top);
  if (c.dir) {
    std::vector<std::string> rels;
    for (const auto& e : stdfs::recursive_directory_iterator(source))  // links are not followed
      rels.push_back(stdfs::relative(e.path(), source).string());
    std::sort(rels.begin(), rels.end());
    for (const std::string& rel : rels) {
      struct stat st {};
      if (::lstat((source + "/" + rel).c_str(), &st) != 0) throw sys_error("lstat(" + source + "/" + rel + ")");
      add(rel, st);
    }
  }
  c.key = fmt::format("{:016x}", fnv1a(signature));
  return c;
}

bool same_file(int fd, const std::string& path) {
  struct stat a {
  }, b{};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// The image at `path` if there is one, open and share-locked (so no cleaner removes it).
UniqueFd open_existing(const std::string& path) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) {
      if (errno == ENOENT) return {};
      throw sys_error("open(" + path + ")");
    }
    check(::flock(fd.get(), LOCK_SH), "flock(" + path + ")");
    if (same_file(fd.get(), path)) return fd;  // else a cleaner removed it before the lock: again
  }
  return {};
}

// Makes the image under a name of this process's, share-locked from the start, and renames it
// into place whole: a crash leaves a temporary file, never a half-made image under the real name.
UniqueFd build(const std::string& image, const std::string& source, const std::string& name, const Content& c) {
  const std::string fresh = fmt::format("{}.new.{}", image, ::getpid());
  UniqueFd fd(::open(fresh.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw sys_error("create " + fresh);
  try {
    check(::flock(fd.get(), LOCK_SH), "flock(" + fresh + ")");
    const uint64_t bytes = std::max(c.bytes + c.bytes / 8 + kMinImageBytes, kMinImageBytes);
    check(::ftruncate(fd.get(), static_cast<off_t>(bytes)), "ftruncate(" + fresh + ")");
    // No journal (nothing writes it after this), no reserved blocks, root-owned root; a
    // directory goes in whole (-d), a single file by debugfs's write (mkfs takes directories).
    std::vector<std::string> argv = {"mkfs.ext4",
                                     "-q",
                                     "-F",
                                     "-O",
                                     "^has_journal",
                                     "-m",
                                     "0",
                                     "-L",
                                     "agentbox-ro",
                                     "-N",
                                     std::to_string(c.entries + 16),
                                     "-E",
                                     "root_owner=0:0,nodiscard"};
    if (c.dir) argv.insert(argv.end(), {"-d", source});
    argv.push_back(fresh);
    run_program_checked(argv);
    if (!c.dir) {
      if (source.find('"') != std::string::npos) throw Error(source + ": a path with a double quote cannot be sealed");
      run_program_checked({"debugfs", "-w", "-R", "write \"" + source + "\" " + name, fresh});
    }
    check(::rename(fresh.c_str(), image.c_str()), "rename(" + fresh + ")");
  } catch (...) {
    ::unlink(fresh.c_str());
    throw;
  }
  return fd;
}

// Images (and temporary files) of this label that no daemon holds: an old CLI's, a crashed
// build's. One a daemon holds keeps its shared lock, so the exclusive one fails and it stays.
void remove_unused(const std::string& cache_dir, const std::string& label, const std::string& keep) {
  UniqueFd dir(::open(cache_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return;
  for (const std::string& entry : dir_names_at(dir.get())) {
    const std::string path = cache_dir + "/" + entry;
    if (path == keep || !entry.starts_with(label + "-") || entry.find(".img") == std::string::npos) continue;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    if (same_file(fd.get(), path)) ::unlink(path.c_str());
  }
}

bool is_mount_root(const std::string& dir) {
  struct statx stx {};
  if (::statx(AT_FDCWD, dir.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) != 0) return false;
  return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

void make_dirs(const std::string& dir, stdfs::perms perms) {
  std::error_code ec;
  if (stdfs::create_directories(dir, ec)) stdfs::permissions(dir, perms, ec);
  if (!stdfs::is_directory(dir)) throw Error("mkdir(" + dir + "): " + (ec ? ec.message() : "not a directory"));
}

}  // namespace

SealedImage::SealedImage(const std::string& source, const std::string& name, const std::string& cache_dir,
                         const std::string& mount_point)
    : mount_point_(mount_point) {
  const Content c = content_of(source);
  const std::string label = stdfs::path(mount_point).filename().string();
  make_dirs(cache_dir, stdfs::perms::owner_all);
  image_ = cache_dir + "/" + label + "-" + c.key + ".img";
  lock_ = open_existing(image_);
  if (!lock_) {
    lock_ = build(image_, source, name, c);
    built_ = true;
    remove_unused(cache_dir, label, image_);
  }

  make_dirs(mount_point, stdfs::perms::owner_all | stdfs::perms::group_exec | stdfs::perms::others_exec);
  while (is_mount_root(mount_point) && ::umount2(mount_point.c_str(), MNT_DETACH) == 0) {
  }
  std::string device;
  // Held until the mount holds the device: closed before, AUTOCLEAR would free it at once.
  const UniqueFd loop = attach_loop(lock_, image_, device, /*read_only=*/true);
  if (::mount(device.c_str(), mount_point.c_str(), "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOATIME, nullptr) != 0)
    throw sys_error("mount(" + device + ", " + mount_point + ")");
  path_ = c.dir ? mount_point : mount_point + "/" + name;

  // The copy is whole, or the image is bad (debugfs says little): removed, so the next start
  // makes it again.
  struct stat want {
  }, got{};
  if (::stat(source.c_str(), &want) != 0 || ::stat(path_.c_str(), &got) != 0 ||
      (!c.dir && got.st_size != want.st_size)) {
    ::umount2(mount_point.c_str(), MNT_DETACH);
    ::unlink(image_.c_str());
    throw Error("the sealed copy of " + source + " in " + image_ + " is incomplete");
  }
}

SealedImage::~SealedImage() {
  if (::umount2(mount_point_.c_str(), 0) != 0 && errno == EBUSY) ::umount2(mount_point_.c_str(), MNT_DETACH);
}

}  // namespace agentbox
