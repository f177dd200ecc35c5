#pragma once
// An account volume's filesystem: an ext4 image as large as the account's disk quota (sparse:
// it takes host blocks only as they are written), with its inode count set to the inode quota,
// mounted nosuid,nodev,noatime through a loop device that frees itself when unmounted
// (LO_FLAGS_AUTOCLEAR). Used by the loop_image backend (volumes/loop_volume.cpp) and its spare
// volumes (volumes/spare_volumes.hpp). Root's work: each mounts the host's filesystems.
#include <sys/stat.h>

#include <string>

#include "util/unique_fd.hpp"
#include "volumes/e2fsprogs_runner.hpp"
#include "volumes/loop_holders.hpp"
#include "volumes/volume_backend.hpp"

namespace agentbox {

// The images of one VOLUMES: what is known of the loop devices holding them, and the thread
// e2fsprogs run from (volumes/e2fsprogs_runner.hpp), so that neither costs more per image the
// more images are attached. Runs on: any thread.
class Ext4Images {
 public:
  explicit Ext4Images(const std::string& volumes_dir) : e2fs_(volumes_dir) {}

  // A new image at `image` (mkfs.ext4; ~40 ms here): written under a temporary name and
  // renamed, so a crash during mkfs leaves no half-made image under the real name.
  void make(const std::string& image, const DiskQuota& quota);

  // A quota raised since the image was made: the image grows and resize2fs grows its
  // filesystem, before it is mounted. A lowered quota applies to new images only.
  void grow(const std::string& image, const DiskQuota& quota);

  // Mounts the image at `dir`: through the loop device already holding it when there is one (a
  // box of an earlier daemon run, or one being torn down, can keep its filesystem alive after
  // the host's mount is gone), else a new one, after e2fsck -p when its ext4 recorded an error.
  void mount(const std::string& image, const std::string& dir);

  // The image mounted nowhere yet: a detached mount (fsmount(2)), held by the descriptor
  // returned, that attach_mount() puts on a directory in a moment. Closing the descriptor
  // unmounts it. Throws Error with ENOSYS when the kernel has no new mount API (before 5.2).
  UniqueFd mount_detached(const std::string& image);

  LoopHolders& loops() { return loops_; }
  E2fsprogsRunner& e2fsprogs() { return e2fs_; }

 private:
  std::string loop_device_for(const UniqueFd& image, const struct stat& st, const std::string& path, UniqueFd& loop);
  void repair_if_marked(const std::string& image);

  LoopHolders loops_;
  E2fsprogsRunner e2fs_;
};

// Puts a detached mount on `dir` (move_mount(2)); under a shared mount it propagates as a
// mount(2) there would (VOLUMES is one: boxes see volumes mounted after they started).
void attach_mount(const UniqueFd& mount, const std::string& dir);

}  // namespace agentbox
