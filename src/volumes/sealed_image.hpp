#pragma once
// A read-only copy of a host file or directory that is a filesystem of its own: an ext4 image
// made once per content in a cache directory and mounted read-only through a loop device. Why:
// a box's /proc/self/mountinfo gives, for every bind, the bound entry's path inside its
// filesystem (the "root" field), so a bind of the host's Claude Code CLI or skills directory
// tells every box where the host keeps them (/home/ops/agentbox/deps/claude-code/...). A bind
// from this image names only a path inside it ("/claude", "/"), and its device is a loop device.
//
// The image is made once per content (the source's paths, sizes, modes, owners and times) and
// shared by every daemon on the host: a daemon holds a shared lock on the image it mounted for
// as long as it runs, and one that builds a new image removes the others nobody holds (an old
// CLI after an upgrade). A changed source reaches boxes at the daemon's next start. Mounts the
// host's filesystems: root's work only.
#include <string>

#include "util/unique_fd.hpp"

namespace agentbox {

class SealedImage {
 public:
  // Seals `source` (a regular file, or a directory copied whole; symlinks resolved by the
  // caller) into an image in cache_dir (made 0700 if missing) and mounts it at mount_point
  // (made if missing; whatever an earlier run left mounted there is detached first). A file
  // lies in the image as `name`; a directory is the image's root. Throws Error saying which
  // step failed (no loop devices, mkfs.ext4 missing, a full disk).
  SealedImage(const std::string& source, const std::string& name, const std::string& cache_dir,
              const std::string& mount_point);
  ~SealedImage();  // unmounted (detached when a box still holds it)
  SealedImage(const SealedImage&) = delete;
  SealedImage& operator=(const SealedImage&) = delete;

  // Where the copy of the source is: mount_point/name for a file, mount_point for a directory.
  const std::string& path() const { return path_; }
  // The image file in the cache (for logs).
  const std::string& image() const { return image_; }
  // Whether this daemon made the image (false: an earlier one's was there).
  bool built() const { return built_; }

 private:
  std::string mount_point_, path_, image_;
  bool built_ = false;
  UniqueFd lock_;  // the image, open with a shared flock: no other daemon removes it meanwhile
};

}  // namespace agentbox
