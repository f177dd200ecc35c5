#pragma once
// Which loop device holds an image, without reading every loop device's record on each mount:
// mounting an image a device already holds must go through that device (a second one would
// mount the same filesystem twice and corrupt it), and asking the kernel means reading
// /sys/block/loop*/loop/backing_file for every device there is: 3,500 reads per mount at 3,500
// attached volumes (bench/RESULTS.md, "Many users"). The devices are read once, at the first
// question (a crashed predecessor's boxes can still hold theirs); after that the table learns
// the devices this daemon attaches. An answer is checked with the device itself before it is
// given (LOOP_GET_STATUS64: the file's device and inode), and comes with the device open: a loop
// device frees itself when its last mount goes (LO_FLAGS_AUTOCLEAR) and may then hold another
// image, but not while someone has it open.
//
// Runs on: any thread (mu_).
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "util/unique_fd.hpp"

namespace agentbox {

class LoopHolders {
 public:
  // prune_from: the table's size at which the freed devices' entries are first dropped.
  explicit LoopHolders(size_t prune_from = 1024) : prune_from_(prune_from), prune_at_(prune_from) {}

  // The loop device holding the file `image` is the stat of, none when none does: its path
  // ("/dev/loopN") and the device open, which keeps it holding the file until closed (mount
  // through the path, then close).
  struct Held {
    std::string device;
    UniqueFd fd;
  };
  std::optional<Held> holder(const struct stat& image);
  // `device` ("/dev/loopN", attach_loop's answer) holds `image` now.
  void attached(const struct stat& image, const std::string& device);

  size_t known() const;  // entries in the table (tests)

 private:
  struct FileId {  // as stat(2) and LOOP_GET_STATUS64 give them
    uint64_t dev;
    uint64_t ino;
    bool operator==(const FileId&) const = default;
  };
  struct FileIdHash {
    size_t operator()(const FileId& id) const { return std::hash<uint64_t>()(id.ino * 31 + id.dev); }
  };
  void scan_locked();
  void prune_locked();

  mutable std::mutex mu_;  // guards the fields below
  bool scanned_ = false;
  std::unordered_map<FileId, unsigned, FileIdHash> by_image_;  // the file → N of /dev/loopN
  const size_t prune_from_;
  size_t prune_at_;  // entries past which the freed devices' are dropped
};

}  // namespace agentbox
