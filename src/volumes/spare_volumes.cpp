#include "volumes/spare_volumes.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "fs/dir_entries.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/thread_priority.hpp"
#include "util/thread_signals.hpp"
#include "volumes/ext4_image.hpp"

namespace agentbox {
namespace {

constexpr const char* kSpareDir = ".spare";
constexpr std::chrono::seconds kRetryAfterFailure{30};

}  // namespace

SpareVolumes::SpareVolumes(const std::string& volumes_dir, SparePolicy policy, Ext4Images& images)
    : dir_(volumes_dir + "/" + kSpareDir),
      policy_(std::move(policy)),
      images_(images),
      prefix_(fmt::format("{}-{}-", policy_.quota.bytes, policy_.quota.inodes)),
      serial_(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count())) {
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + dir_ + ")");
  thread_ = std::thread([this] { refill(); });
}

SpareVolumes::~SpareVolumes() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // spares_ goes now: each detached mount with its descriptor; the images stay in dir_.
}

size_t SpareVolumes::ready() const {
  std::lock_guard lock(mu_);
  return spares_.size();
}

SpareVolumes::Taken SpareVolumes::take(const DiskQuota& quota, const std::string& image, const std::string& dir) {
  Spare spare;
  {
    std::lock_guard lock(mu_);
    if (quota.bytes != policy_.quota.bytes || quota.inodes != policy_.quota.inodes || spares_.empty())
      return Taken::none;
    spare = std::move(spares_.front());
    spares_.pop_front();
  }
  wake_.notify_all();  // one to make
  if (::rename(spare.image.c_str(), image.c_str()) != 0) {
    log::warn("volumes", "spare volume {}: rename to {}: {}", spare.image, image, std::strerror(errno));
    spare.mount.reset();
    ::unlink(spare.image.c_str());
    return Taken::none;
  }
  if (!spare.mount) return Taken::image;
  try {
    attach_mount(spare.mount, dir);
    return Taken::mounted;
  } catch (const Error& e) {
    log::warn("volumes", "spare volume {}: {} (mounted the usual way instead)", image, e.what());
    return Taken::image;  // its descriptor closes here: the usual mount takes the image
  }
}

void SpareVolumes::refill() {
  block_process_signals();  // util/thread_signals.hpp: a SIGTERM here would kill the daemon
  ::pthread_setname_np(::pthread_self(), "spare-volumes");
  lower_thread_priority();
  adopt_leftovers();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (spares_.size() >= policy_.count) {
      wake_.wait(lock);
      continue;
    }
    lock.unlock();
    try {
      Spare spare = make();
      lock.lock();
      spares_.push_back(std::move(spare));
    } catch (const std::exception& e) {
      log::warn("volumes", "spare volume: {}; new accounts make their own for now", e.what());
      lock.lock();
      wake_.wait_for(lock, kRetryAfterFailure, [this] { return stopping_; });
    }
  }
}

SpareVolumes::Spare SpareVolumes::make() {
  Spare spare;
  {
    std::lock_guard lock(mu_);
    spare.image = fmt::format("{}/{}{}.img", dir_, prefix_, serial_++);
  }
  images_.make(spare.image, policy_.quota);
  bool detached;
  {
    std::lock_guard lock(mu_);
    detached = detached_mounts_;
  }
  if (!detached) return spare;
  try {
    spare.mount = images_.mount_detached(spare.image);
  } catch (const Error& e) {
    if (e.code() != ENOSYS) {
      ::unlink(spare.image.c_str());
      throw;
    }
    std::lock_guard lock(mu_);
    detached_mounts_ = false;  // an old kernel: images only, mounted when taken
  }
  return spare;
}

// What a previous run left: its spares of this quota are mounted again, anything else goes
// (spares of another quota, half-made images).
void SpareVolumes::adopt_leftovers() {
  UniqueFd dir(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return log::warn("volumes", "spare volumes: open({}): {}", dir_, std::strerror(errno));
  std::vector<DirEntry> entries;
  try {
    entries = read_dir_entries(dir.get(), dir_);
  } catch (const std::exception& e) {
    return log::warn("volumes", "spare volumes: {}", e.what());
  }
  for (const DirEntry& e : entries) {
    const std::string path = dir_ + "/" + e.name;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    const bool ours = e.name.starts_with(prefix_) && e.name.ends_with(".img") && ready() < policy_.count;
    if (!ours) {
      ::unlink(path.c_str());
      continue;
    }
    Spare spare{path, {}};
    try {
      spare.mount = images_.mount_detached(path);
    } catch (const Error& err) {
      if (err.code() != ENOSYS) {
        log::warn("volumes", "spare volume {}: {} (deleted)", path, err.what());
        ::unlink(path.c_str());
        continue;
      }
      std::lock_guard lock(mu_);
      detached_mounts_ = false;
    }
    std::lock_guard lock(mu_);
    spares_.push_back(std::move(spare));
  }
}

}  // namespace agentbox
