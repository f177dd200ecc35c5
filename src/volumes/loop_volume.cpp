// The loop_image volume backend (volumes/volume_backend.hpp): VOLUMES/NAME.img, an ext4 image of
// the account's quota (volumes/ext4_image.hpp) mounted at VOLUMES/NAME; a new account's is a
// spare made ahead when there is one (volumes/spare_volumes.hpp).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <mutex>
#include <string>

#include "util/error.hpp"
#include "util/loop_image_probe.hpp"
#include "volumes/ext4_image.hpp"
#include "volumes/ext4_superblock.hpp"
#include "volumes/spare_volumes.hpp"
#include "volumes/volume_backend.hpp"

namespace agentbox {
namespace {

std::string parent_of(const std::string& dir) {
  size_t slash = dir.find_last_of('/');
  return slash == std::string::npos || slash == 0 ? "/" : dir.substr(0, slash);
}

// A directory is a mount point of ours when it sits on another device than its parent.
bool is_mounted(const std::string& dir) {
  struct stat self {
  }, parent{};
  if (::stat(dir.c_str(), &self) != 0 || ::stat(parent_of(dir).c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

// Whether `dir` is the root of a mount (a bind of a directory onto itself is one too).
bool is_mount_root(const std::string& dir) {
  struct statx stx {};
  if (::statx(AT_FDCWD, dir.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) != 0) return false;
  return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

class LoopImageBackend final : public VolumeBackend {
 public:
  explicit LoopImageBackend(SparePolicy spares) : spare_policy_(std::move(spares)) {}

  // Boxes are made in a mount namespace of their own, copied when the daemon's box side
  // started (a slave of the host's): a volume mounted later reaches it only through a shared
  // mount. VOLUMES becomes one, whatever the host's propagation (often private outside systemd).
  // The spares are made from here on.
  void open_root(const std::string& volumes_dir) override {
    if (!is_mount_root(volumes_dir))
      check(::mount(volumes_dir.c_str(), volumes_dir.c_str(), nullptr, MS_BIND, nullptr),
            "mount(" + volumes_dir + ", bind)");
    check(::mount(nullptr, volumes_dir.c_str(), nullptr, MS_SHARED, nullptr), "mount(" + volumes_dir + ", shared)");
    Ext4Images& images = images_for(volumes_dir);
    if (spare_policy_.count > 0) spares_ = std::make_unique<SpareVolumes>(volumes_dir, spare_policy_, images);
  }
  // Busy when a box's teardown still holds it (or a volume could not be let go): detached
  // then, freed when the last holder lets go, so no daemon leaves its bind behind.
  void close_root(const std::string& volumes_dir) override {
    spares_.reset();  // the refill ends; the spares' mounts go, their images stay
    if (!is_mount_root(volumes_dir) || ::umount2(volumes_dir.c_str(), 0) == 0) return;
    if (errno == EBUSY) ::umount2(volumes_dir.c_str(), MNT_DETACH);
  }
  const SpareVolumes* spares() const override { return spares_.get(); }

  VolumeKind kind() const override { return VolumeKind::loop_image; }
  std::string describe() const override {
    return "loop_image (an ext4 image per account, mounted through a loop device)";
  }

  void prepare(const std::string& dir, const DiskQuota& quota) override {
    if (!quota.bounded()) throw Error("a loop_image volume needs a disk size");
    if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) throw sys_error("mkdir(" + dir + ")");
    const std::string image = dir + ".img";
    if (is_mounted(dir)) return;
    if (::access(image.c_str(), F_OK) == 0) {
      images_for(parent_of(dir)).grow(image, quota);
      images_for(parent_of(dir)).mount(image, dir);
    } else if (SpareVolumes::Taken taken = spares_ ? spares_->take(quota, image, dir) : SpareVolumes::Taken::none;
               taken == SpareVolumes::Taken::none) {
      images_for(parent_of(dir)).make(image, quota);
      images_for(parent_of(dir)).mount(image, dir);
    } else if (taken == SpareVolumes::Taken::image) {
      images_for(parent_of(dir)).mount(image, dir);
    }
    check(::chmod(dir.c_str(), 0711), "chmod(" + dir + ")");  // the image's root, now
  }

  VolumeUsage usage(const std::string& dir) const override {
    if (!is_mounted(dir)) return ext4_image_usage(dir + ".img").value_or(VolumeUsage{});
    struct statvfs s {};
    check(::statvfs(dir.c_str(), &s), "statvfs(" + dir + ")");
    VolumeUsage u;
    u.bytes_limit = static_cast<uint64_t>(s.f_blocks) * s.f_frsize;
    u.bytes_used = static_cast<uint64_t>(s.f_blocks - s.f_bfree) * s.f_frsize;
    u.inodes_limit = s.f_files;
    u.inodes_used = s.f_files - s.f_ffree;
    return u;
  }

  // The image is what holds the files (its mount point goes with each detach).
  bool made(const std::string& dir) const override { return ::access((dir + ".img").c_str(), F_OK) == 0; }

  void release(const std::string& dir) override {
    if (!is_mounted(dir)) return;
    if (::umount2(dir.c_str(), 0) == 0) return;
    // Something still holds a file in it (a box being torn down): detach now, freed when let go.
    if (errno == EBUSY && ::umount2(dir.c_str(), MNT_DETACH) == 0) return;
    throw sys_error("umount(" + dir + ")");
  }

  bool detach(const std::string& dir) override {
    if (is_mounted(dir)) {
      if (::umount2(dir.c_str(), 0) != 0) {
        if (errno == EBUSY) return false;
        throw sys_error("umount(" + dir + ")");
      }
    }
    if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) throw sys_error("rmdir(" + dir + ")");
    return true;
  }

  std::optional<uint64_t> remove_if_empty(const std::string& dir,
                                          const std::function<bool(const VolumeUsage&)>& empty) override {
    if (is_mounted(dir)) return std::nullopt;
    const std::string image = dir + ".img";
    if (!ext4_image_settled(image)) return std::nullopt;  // a journal to replay: its counts may lag
    std::optional<VolumeUsage> usage = ext4_image_usage(image);
    struct stat st {};
    if (!usage || !empty(*usage) || ::stat(image.c_str(), &st) != 0) return std::nullopt;
    // The mount point first: one that holds anything (never ours) keeps the image too.
    if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return std::nullopt;
    if (::unlink(image.c_str()) != 0) throw sys_error("unlink(" + image + ")");
    return static_cast<uint64_t>(st.st_blocks) * 512;
  }

 private:
  // VOLUMES' images, made when it is opened (or a volume prepared before that: tests).
  Ext4Images& images_for(const std::string& volumes_dir) {
    std::lock_guard lock(images_mu_);
    if (!images_) images_ = std::make_unique<Ext4Images>(volumes_dir);
    return *images_;
  }

  SparePolicy spare_policy_;
  std::mutex images_mu_;
  std::unique_ptr<Ext4Images> images_;    // before spares_, whose refill makes and mounts through it
  std::unique_ptr<SpareVolumes> spares_;  // while VOLUMES is open
};

class PlainBackend final : public VolumeBackend {
 public:
  VolumeKind kind() const override { return VolumeKind::plain; }
  std::string describe() const override { return "plain (directories of the state filesystem, no quota)"; }
  void prepare(const std::string& dir, const DiskQuota&) override {
    if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) throw sys_error("mkdir(" + dir + ")");
  }
  VolumeUsage usage(const std::string&) const override { return {}; }
  bool made(const std::string& dir) const override { return ::access(dir.c_str(), F_OK) == 0; }
  void release(const std::string&) override {}
};

}  // namespace

std::unique_ptr<VolumeBackend> make_volume_backend(bool quotas, SparePolicy spares) {
  if (!quotas) return std::make_unique<PlainBackend>();
  std::string why;
  if (!loop_images_supported(&why))
    throw Error("disk quotas need loop devices and mkfs.ext4 (e2fsprogs): " + why +
                "; or set [accounts] disk = \"0\" to run without quotas");
  return std::make_unique<LoopImageBackend>(std::move(spares));
}

}  // namespace agentbox
