// The loop_image volume backend (volumes/volume_backend.hpp): VOLUMES/NAME.img, an ext4 image as
// large as the account's disk quota (sparse: it takes host blocks only as they are written),
// with its inode count set to the inode quota, mounted at VOLUMES/NAME nosuid,nodev through a
// loop device that frees itself when unmounted (LO_FLAGS_AUTOCLEAR).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/loop_image_probe.hpp"
#include "util/run_program.hpp"
#include "util/unique_fd.hpp"
#include "volumes/ext4_superblock.hpp"
#include "volumes/loop_device.hpp"
#include "volumes/volume_backend.hpp"

namespace agentbox {
namespace {

constexpr unsigned long kMountFlags = MS_NOSUID | MS_NODEV | MS_NOATIME;
// ext4 wants room for its inode tables: at most one inode per this many bytes of image.
constexpr uint64_t kMinBytesPerInode = 1024;

std::string parent_of(const std::string& dir) {
  size_t slash = dir.find_last_of('/');
  return slash == std::string::npos || slash == 0 ? "/" : dir.substr(0, slash);
}

// A directory is a mount point of ours when it sits on another device than its parent.
bool is_mounted(const std::string& dir) {
  struct stat self{}, parent{};
  if (::stat(dir.c_str(), &self) != 0 || ::stat(parent_of(dir).c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

// A new image at `image`: written under a temporary name and renamed, so a crash during mkfs
// leaves no half-made image under the real name.
void make_image(const std::string& image, const DiskQuota& quota) {
  const std::string fresh = image + ".new";
  {
    UniqueFd fd(::open(fresh.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) throw sys_error("create " + fresh);
    check(::ftruncate(fd.get(), static_cast<off_t>(quota.bytes)), "ftruncate(" + fresh + ")");
  }
  std::vector<std::string> argv = {"mkfs.ext4", "-q", "-F", "-m", "0", "-L", "agentbox",
                                   // Root owns the volume's root; the home below it is the account's.
                                   "-E", "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1,nodiscard"};
  if (quota.inodes) {
    const uint64_t inodes = std::min(quota.inodes, quota.bytes / kMinBytesPerInode);
    argv.insert(argv.end(), {"-N", std::to_string(inodes)});
  }
  argv.push_back(fresh);
  try {
    run_program_checked(argv);
  } catch (...) {
    ::unlink(fresh.c_str());
    throw;
  }
  check(::rename(fresh.c_str(), image.c_str()), "rename(" + fresh + ")");
}

// The loop device already holding `image` (a box of an earlier daemon run can keep its
// filesystem alive after the host's mount is gone): mounting that one again shares its
// superblock, where a second loop device would mount the same image twice and corrupt it.
std::string attached_loop(const struct stat& image) {
  DIR* dir = ::opendir("/sys/block");
  if (!dir) return {};
  std::string found;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (!name.starts_with("loop")) continue;
    // backing_file names the image as it was opened; compare the file itself, not the text.
    auto backing = read_file_if_exists("/sys/block/" + name + "/loop/backing_file", 8192);
    if (!backing) continue;
    while (!backing->empty() && backing->back() == '\n') backing->pop_back();
    struct stat st{};
    if (::stat(backing->c_str(), &st) == 0 && st.st_dev == image.st_dev && st.st_ino == image.st_ino) {
      found = "/dev/" + name;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

void mount_image(const std::string& image_path, const std::string& dir) {
  UniqueFd image(::open(image_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!image) throw sys_error("open(" + image_path + ")");
  struct stat st{};
  check(::fstat(image.get(), &st), "fstat(" + image_path + ")");
  if (std::string held = attached_loop(st); !held.empty()) {
    if (::mount(held.c_str(), dir.c_str(), "ext4", kMountFlags, "errors=remount-ro") != 0)
      throw sys_error("mount(" + held + ", " + dir + ")");
    return;
  }
  std::string device;
  UniqueFd loop = attach_loop(image, image_path, device);
  if (::mount(device.c_str(), dir.c_str(), "ext4", kMountFlags, "errors=remount-ro") != 0)
    throw sys_error("mount(" + device + ", " + dir + ")");
  // The mount holds the device now; closing ours lets AUTOCLEAR free it at unmount.
}

// A quota raised since the image was made: before it is mounted, the image grows and
// resize2fs grows its filesystem (offline: growing a mounted ext4 needs CAP_SYS_RESOURCE, which
// the daemon gives up). A lowered quota applies to new images only.
void grow_if_needed(const std::string& image_path, const DiskQuota& quota) {
  struct stat st{};
  if (::stat(image_path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) >= quota.bytes) return;
  check(::truncate(image_path.c_str(), static_cast<off_t>(quota.bytes)), "truncate(" + image_path + ")");
  // resize2fs wants a freshly checked filesystem; -p: repair only what is safe without asking.
  const ProgramResult fsck = run_program({"e2fsck", "-f", "-p", image_path});
  if (fsck.status > 1) throw Error("e2fsck " + image_path + " failed (status " + std::to_string(fsck.status) + ")");
  run_program_checked({"resize2fs", image_path});
}

// Whether `dir` is the root of a mount (a bind of a directory onto itself is one too).
bool is_mount_root(const std::string& dir) {
  struct statx stx{};
  if (::statx(AT_FDCWD, dir.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) != 0) return false;
  return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

class LoopImageBackend final : public VolumeBackend {
 public:
  // Boxes are made in a mount namespace of their own, copied when the daemon's box side
  // started (a slave of the host's): a volume mounted later reaches it only through a shared
  // mount. VOLUMES becomes one, whatever the host's propagation (often private outside systemd).
  void open_root(const std::string& volumes_dir) override {
    if (!is_mount_root(volumes_dir))
      check(::mount(volumes_dir.c_str(), volumes_dir.c_str(), nullptr, MS_BIND, nullptr),
            "mount(" + volumes_dir + ", bind)");
    check(::mount(nullptr, volumes_dir.c_str(), nullptr, MS_SHARED, nullptr), "mount(" + volumes_dir + ", shared)");
  }
  // Busy when a box's teardown still holds it (or a volume could not be let go): detached
  // then, freed when the last holder lets go, so no daemon leaves its bind behind.
  void close_root(const std::string& volumes_dir) override {
    if (!is_mount_root(volumes_dir) || ::umount2(volumes_dir.c_str(), 0) == 0) return;
    if (errno == EBUSY) ::umount2(volumes_dir.c_str(), MNT_DETACH);
  }

  VolumeKind kind() const override { return VolumeKind::loop_image; }
  std::string describe() const override {
    return "loop_image (an ext4 image per account, mounted through a loop device)";
  }

  void prepare(const std::string& dir, const DiskQuota& quota) override {
    if (!quota.bounded()) throw Error("a loop_image volume needs a disk size");
    if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) throw sys_error("mkdir(" + dir + ")");
    const std::string image = dir + ".img";
    if (is_mounted(dir)) return;
    if (::access(image.c_str(), F_OK) != 0)
      make_image(image, quota);
    else
      grow_if_needed(image, quota);
    mount_image(image, dir);
    check(::chmod(dir.c_str(), 0711), "chmod(" + dir + ")");  // the image's root, now
  }

  VolumeUsage usage(const std::string& dir) const override {
    if (!is_mounted(dir)) return ext4_image_usage(dir + ".img").value_or(VolumeUsage{});
    struct statvfs s{};
    check(::statvfs(dir.c_str(), &s), "statvfs(" + dir + ")");
    VolumeUsage u;
    u.bytes_limit = static_cast<uint64_t>(s.f_blocks) * s.f_frsize;
    u.bytes_used = static_cast<uint64_t>(s.f_blocks - s.f_bfree) * s.f_frsize;
    u.inodes_limit = s.f_files;
    u.inodes_used = s.f_files - s.f_ffree;
    return u;
  }

  void release(const std::string& dir) override {
    if (!is_mounted(dir)) return;
    if (::umount2(dir.c_str(), 0) == 0) return;
    // Something still holds a file in it (a box being torn down): detach now, freed when let go.
    if (errno == EBUSY && ::umount2(dir.c_str(), MNT_DETACH) == 0) return;
    throw sys_error("umount(" + dir + ")");
  }
};

class PlainBackend final : public VolumeBackend {
 public:
  VolumeKind kind() const override { return VolumeKind::plain; }
  std::string describe() const override { return "plain (directories of the state filesystem, no quota)"; }
  void prepare(const std::string& dir, const DiskQuota&) override {
    if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) throw sys_error("mkdir(" + dir + ")");
  }
  VolumeUsage usage(const std::string&) const override { return {}; }
  void release(const std::string&) override {}
};

}  // namespace

std::unique_ptr<VolumeBackend> make_volume_backend(bool quotas) {
  if (!quotas) return std::make_unique<PlainBackend>();
  std::string why;
  if (!loop_images_supported(&why))
    throw Error("disk quotas need loop devices and mkfs.ext4 (e2fsprogs): " + why +
                "; or set [accounts] disk = \"0\" to run without quotas");
  return std::make_unique<LoopImageBackend>();
}

}  // namespace agentbox
