#pragma once
// Where an account's files live on the host, and what bounds them (DESIGN §8). Every account
// has a volume: a directory VOLUMES/NAME holding its home, its trash and its spool. The backend
// decides what that directory is:
//   loop_image  a filesystem image VOLUMES/NAME.img of the account's disk size, mounted there
//               through a loop device: full is full for everyone writing into it, root included
//   plain       a directory of the state filesystem: no quota ([accounts] disk = "0")
// The kernel enforces the bound either way: a box sees ENOSPC when its image is full, and the
// daemon's own writes into a volume (uploads, process logs, spool) are charged to it.
//
// Project quotas (ext4/XFS `prjquota`) would bound a directory of the state filesystem with no
// image; agentbox uses images because the kernels we test on have no quota support at all
// (CONFIG_QUOTA off: docs/CONFIGURATION.md).
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace agentbox {

struct DiskQuota {
  uint64_t bytes = 0;   // 0: unbounded
  uint64_t inodes = 0;  // 0: the filesystem's default for that size
  bool bounded() const { return bytes != 0; }
};

// What a volume holds and may hold, as the kernel counts it.
struct VolumeUsage {
  uint64_t bytes_used = 0;
  uint64_t bytes_limit = 0;  // 0: unbounded (plain)
  uint64_t inodes_used = 0;
  uint64_t inodes_limit = 0;  // 0: unbounded (plain)
};

enum class VolumeKind { plain, loop_image };

class SpareVolumes;

// Volumes made ahead for new accounts (volumes/spare_volumes.hpp), loop_image only.
struct SparePolicy {
  size_t count = 0;  // spares kept ready; 0: none ([accounts] spare_volumes)
  DiskQuota quota;   // theirs: the default quota (an account with another makes its own)
};

// Runs on: open_root() and close_root() on the daemon's main thread at start and stop;
// prepare(), usage() and release() on any thread (AccountVolumes: one per volume at a time).
class VolumeBackend {
 public:
  virtual ~VolumeBackend() = default;
  virtual VolumeKind kind() const = 0;
  // One line for the start banner and `agentbox doctor`.
  virtual std::string describe() const = 0;

  // Called once for VOLUMES before any volume is prepared, and once when the daemon lets go.
  virtual void open_root(const std::string& /*volumes_dir*/) {}
  virtual void close_root(const std::string& /*volumes_dir*/) {}

  // Makes `dir` (VOLUMES/NAME) the root of a volume of `quota`, owned by root, and returns with
  // it ready (mounted). A volume that exists is reused as it is; one that is ready already costs
  // one stat. Safe to call again after a crash at any point.
  virtual void prepare(const std::string& dir, const DiskQuota& quota) = 0;
  virtual VolumeUsage usage(const std::string& dir) const = 0;
  // Whether the volume has been made (prepare() ran for it, perhaps in an earlier run): an
  // account without one has never needed its disk (AccountVolumes::exists).
  virtual bool made(const std::string& dir) const = 0;
  // The volume is no longer in use (account deleted): unmounted, its image and directory kept
  // for the caller to move away.
  virtual void release(const std::string& dir) = 0;
  // The volume is idle: unmounted (its loop device frees itself) unless something holds a file
  // in it, never forced; false then, and it stays mounted. Its empty mount point goes too, so a
  // path into the volume fails with ENOENT until prepare() attaches it again, rather than
  // reaching the state filesystem under it.
  virtual bool detach(const std::string& /*dir*/) { return true; }
  // The detached volume at `dir` is deleted for good (its image and mount point) when its
  // counts, read without mounting it, are exact (it was unmounted cleanly) and `empty` says
  // they are a new volume's. Returns the bytes of disk freed; nullopt when it stays (attached,
  // not settled, not empty, or a backend that never forgets: plain).
  virtual std::optional<uint64_t> remove_if_empty(const std::string& /*dir*/,
                                                  const std::function<bool(const VolumeUsage&)>& /*empty*/) {
    return std::nullopt;
  }
  // The spares made ahead, while VOLUMES is open (null: none).
  virtual const SpareVolumes* spares() const { return nullptr; }
};

// loop_image when quotas are wanted, else plain. Throws Error saying why when this host cannot
// mount images (no loop devices, no mkfs.ext4): quotas asked for are never silently dropped.
// A loop_image backend keeps `spares` made ahead from open_root() to close_root().
std::unique_ptr<VolumeBackend> make_volume_backend(bool quotas, SparePolicy spares = {});

}  // namespace agentbox
