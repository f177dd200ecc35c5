#pragma once
// Volumes made ahead for new accounts, so that a new user's first request does not wait for
// mkfs.ext4 and a mount (~66 ms here; bench/RESULTS.md). A spare is an image of the default
// quota (volumes/ext4_image.hpp) already mounted as a detached mount (fsmount(2): in no
// directory, reachable by no one) and held by its descriptor. A new account whose quota is the
// default takes one: the image is renamed to VOLUMES/NAME.img and the mount moved onto
// VOLUMES/NAME (move_mount(2)), well under a millisecond. A thread of its own refills the pool.
//
// Bounded: at most `count` spares ([accounts] spare_volumes, default 2), each a sparse image in
// VOLUMES/.spare (a few MiB of metadata), a loop device and a mount; the refill makes one at a
// time at nice 19 and the lowest best-effort I/O priority, and after a failure waits 30 s.
// At start: the spares a previous run left in VOLUMES/.spare are mounted again when their
// quota (in their name: BYTES-INODES-N.img) is still the default, deleted otherwise, and the
// pool is filled up from there. At stop: the refill ends (a mkfs under way is waited for), the
// mounts go with their descriptors (the loop devices free themselves) and the images stay for
// the next start. On a kernel without the new mount API (before 5.2) a spare is an image only,
// mounted when it is taken.
//
// Runs on: take() and ready() on any thread (mu_); the refill on its own thread ("spare-volumes",
// which takes none of the signals sent to the daemon).
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "util/unique_fd.hpp"
#include "volumes/ext4_image.hpp"
#include "volumes/volume_backend.hpp"

namespace agentbox {

class SpareVolumes {
 public:
  // volumes_dir: VOLUMES (a mount of its own, so a spare's image leaves .spare by rename);
  // images: VOLUMES' images (outlives this).
  SpareVolumes(const std::string& volumes_dir, SparePolicy policy, Ext4Images& images);
  ~SpareVolumes();
  SpareVolumes(const SpareVolumes&) = delete;
  SpareVolumes& operator=(const SpareVolumes&) = delete;

  enum class Taken {
    none,     // no spare of that quota: make the volume as usual
    image,    // the spare's image is `image` now, not mounted: mount it
    mounted,  // the spare is `image`, mounted on `dir`: ready
  };
  // A spare for a new volume of `quota` whose image is to be `image` (VOLUMES/NAME.img, absent)
  // and whose mount point is `dir` (VOLUMES/NAME, an empty directory).
  Taken take(const DiskQuota& quota, const std::string& image, const std::string& dir);

  // Spares ready now (tests, the start banner).
  size_t ready() const;

 private:
  struct Spare {
    std::string image;
    UniqueFd mount;  // the detached mount; none without the new mount API
  };
  void refill();
  void adopt_leftovers();
  Spare make();

  const std::string dir_;  // VOLUMES/.spare
  const SparePolicy policy_;
  Ext4Images& images_;
  const std::string prefix_;  // "BYTES-INODES-": the quota in the name of its spares
  mutable std::mutex mu_;     // guards the fields below
  std::condition_variable wake_;
  std::deque<Spare> spares_;
  bool stopping_ = false;
  bool detached_mounts_ = true;  // the kernel has the new mount API (as far as we know)
  uint64_t serial_ = 0;          // the next spare's N
  std::thread thread_;           // last: started once the rest is set
};

}  // namespace agentbox
