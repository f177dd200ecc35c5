#include "volumes/ext4_image.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <vector>

#include "util/error.hpp"
#include "util/log.hpp"
#include "util/run_program.hpp"
#include "volumes/ext4_superblock.hpp"
#include "volumes/loop_device.hpp"

namespace agentbox {
namespace {

constexpr unsigned long kMountFlags = MS_NOSUID | MS_NODEV | MS_NOATIME;
// noinit_itable: the kernel would otherwise zero every inode table in the background (a GiB-sized
// image holds tens of MiB of them), taking host disk for nothing; the unused ones are marked so.
constexpr const char* kMountData = "errors=remount-ro,noinit_itable";
constexpr unsigned kMountAttrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOATIME;
// ext4 wants room for its inode tables: at most one inode per this many bytes of image.
constexpr uint64_t kMinBytesPerInode = 1024;

UniqueFd open_image(const std::string& image_path, struct stat& st) {
  UniqueFd image(::open(image_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!image) throw sys_error("open(" + image_path + ")");
  check(::fstat(image.get(), &st), "fstat(" + image_path + ")");
  return image;
}

}  // namespace

// The device to mount the image through: the loop device already holding it when there is one
// (mounting that one again shares its superblock), else a new one; open in `loop` until mounted.
std::string Ext4Images::loop_device_for(const UniqueFd& image, const struct stat& st, const std::string& image_path,
                                        UniqueFd& loop) {
  if (std::optional<LoopHolders::Held> held = loops_.holder(st)) {
    loop = std::move(held->fd);
    return held->device;
  }
  repair_if_marked(image_path);  // mounted nowhere: e2fsck may have it
  std::string device;
  loop = attach_loop(image, image_path, device);
  loops_.attached(st, device);
  return device;
}

// An image whose ext4 recorded an error (it went read-only: a full state disk refused a write)
// is checked before it is mounted again, so the volume comes back writable and consistent;
// -p repairs only what is safe without asking. What it cannot repair is left to the kernel,
// which mounts it and goes read-only again at the first error.
void Ext4Images::repair_if_marked(const std::string& image_path) {
  if (!ext4_image_has_errors(image_path)) return;
  const ProgramResult fsck = e2fs_.run({"e2fsck", "-f", "-p", image_path});
  if (fsck.status > 1)
    log::warn("volumes", "{}: errors e2fsck -p could not repair (status {}): {}; mounted as it is", image_path,
              fsck.status, last_output_line(fsck.output));
  else
    log::info("volumes", "{}: repaired the errors its ext4 recorded (e2fsck -p)", image_path);
}

void Ext4Images::make(const std::string& image, const DiskQuota& quota) {
  const std::string fresh = image + ".new";
  {
    UniqueFd fd(::open(fresh.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) throw sys_error("create " + fresh);
    check(::ftruncate(fd.get(), static_cast<off_t>(quota.bytes)), "ftruncate(" + fresh + ")");
  }
  // What an empty image takes on the host is its metadata written: with the defaults ~4.3 MiB
  // for 10 GiB, nearly all of it the blocks reserved for online growth (resize_inode; the
  // daemon grows images offline, grow()). Without those and with all groups' metadata in
  // one flex group (-G), an empty 10 GiB account's image holds ~300 KiB, a 64 MiB one ~150 KiB
  // (bench/RESULTS.md). Not sparse_super2 (one backup superblock, ~70 KiB less): resize2fs
  // 1.47 leaves a block bitmap wrong when it grows one, and the kernel then remounts it
  // read-only (tests/e2e/test_cluster_moves.py grows a volume).
  std::vector<std::string> argv = {"mkfs.ext4", "-q", "-F", "-m", "0", "-L", "agentbox", "-O", "^resize_inode", "-G",
                                   "4096",
                                   // Root owns the volume's root; the home below it is the account's.
                                   "-E", "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1,nodiscard"};
  if (quota.inodes) {
    const uint64_t inodes = std::min(quota.inodes, quota.bytes / kMinBytesPerInode);
    argv.insert(argv.end(), {"-N", std::to_string(inodes)});
  }
  argv.push_back(fresh);
  try {
    e2fs_.run_checked(argv);
  } catch (...) {
    ::unlink(fresh.c_str());
    throw;
  }
  check(::rename(fresh.c_str(), image.c_str()), "rename(" + fresh + ")");
}

void Ext4Images::grow(const std::string& image_path, const DiskQuota& quota) {
  struct stat st {};
  if (::stat(image_path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) >= quota.bytes) return;
  check(::truncate(image_path.c_str(), static_cast<off_t>(quota.bytes)), "truncate(" + image_path + ")");
  // resize2fs wants a freshly checked filesystem; -p: repair only what is safe without asking.
  // Offline: growing a mounted ext4 needs CAP_SYS_RESOURCE, which the daemon gives up.
  const ProgramResult fsck = e2fs_.run({"e2fsck", "-f", "-p", image_path});
  if (fsck.status > 1) throw Error("e2fsck " + image_path + " failed (status " + std::to_string(fsck.status) + ")");
  e2fs_.run_checked({"resize2fs", image_path});
}

void Ext4Images::mount(const std::string& image_path, const std::string& dir) {
  struct stat st {};
  UniqueFd image = open_image(image_path, st);
  UniqueFd loop;
  const std::string device = loop_device_for(image, st, image_path, loop);
  if (::mount(device.c_str(), dir.c_str(), "ext4", kMountFlags, kMountData) != 0)
    throw sys_error("mount(" + device + ", " + dir + ")");
  // The mount holds the device now; closing ours lets AUTOCLEAR free it at unmount.
}

UniqueFd Ext4Images::mount_detached(const std::string& image_path) {
  UniqueFd fs(::fsopen("ext4", FSOPEN_CLOEXEC));
  if (!fs) throw sys_error("fsopen(ext4)");
  struct stat st {};
  UniqueFd image = open_image(image_path, st);
  UniqueFd loop;
  const std::string device = loop_device_for(image, st, image_path, loop);
  check(::fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", device.c_str(), 0), "fsconfig(source " + device + ")");
  check(::fsconfig(fs.get(), FSCONFIG_SET_STRING, "errors", "remount-ro", 0), "fsconfig(errors)");
  check(::fsconfig(fs.get(), FSCONFIG_SET_FLAG, "noinit_itable", nullptr, 0), "fsconfig(noinit_itable)");
  check(::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0), "fsconfig(create " + image_path + ")");
  UniqueFd mount(::fsmount(fs.get(), FSMOUNT_CLOEXEC, kMountAttrs));
  if (!mount) throw sys_error("fsmount(" + image_path + ")");
  return mount;  // it holds the device now, as a mount(2) would
}

void attach_mount(const UniqueFd& mount, const std::string& dir) {
  check(::move_mount(mount.get(), "", AT_FDCWD, dir.c_str(), MOVE_MOUNT_F_EMPTY_PATH), "move_mount(" + dir + ")");
}

}  // namespace agentbox
