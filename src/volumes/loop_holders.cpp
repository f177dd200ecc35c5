#include "volumes/loop_holders.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

namespace agentbox {
namespace {

std::string device_path(unsigned n) { return "/dev/loop" + std::to_string(n); }

// Loop device N, open, and the file it holds as the kernel knows it (not by a path, which a
// rename or an unlink changes); none when it holds nothing.
struct Bound {
  UniqueFd fd;
  uint64_t dev = 0, ino = 0;
};
std::optional<Bound> bound(unsigned n) {
  Bound b{UniqueFd(::open(device_path(n).c_str(), O_RDONLY | O_CLOEXEC)), 0, 0};
  if (!b.fd) return std::nullopt;
  loop_info64 info{};
  if (::ioctl(b.fd.get(), LOOP_GET_STATUS64, &info) != 0) return std::nullopt;  // ENXIO: free
  b.dev = info.lo_device;
  b.ino = info.lo_inode;
  return b;
}

// N of "loopN".
std::optional<unsigned> loop_number(std::string_view name) {
  if (!name.starts_with("loop")) return std::nullopt;
  name.remove_prefix(4);
  unsigned n = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (name.empty() || ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return n;
}

}  // namespace

std::optional<LoopHolders::Held> LoopHolders::holder(const struct stat& image) {
  std::lock_guard lock(mu_);
  if (!scanned_) scan_locked();
  const FileId id{image.st_dev, image.st_ino};
  auto it = by_image_.find(id);
  if (it == by_image_.end()) return std::nullopt;
  std::optional<Bound> b = bound(it->second);
  if (!b || b->dev != id.dev || b->ino != id.ino) {
    by_image_.erase(it);  // freed since (its last mount went), or holding another file now
    return std::nullopt;
  }
  return Held{device_path(it->second), std::move(b->fd)};
}

void LoopHolders::attached(const struct stat& image, const std::string& device) {
  const std::string_view prefix = "/dev/";
  if (!device.starts_with(prefix)) return;
  std::optional<unsigned> n = loop_number(std::string_view(device).substr(prefix.size()));
  if (!n) return;
  std::lock_guard lock(mu_);
  by_image_[FileId{image.st_dev, image.st_ino}] = *n;
  if (by_image_.size() >= prune_at_) prune_locked();
}

size_t LoopHolders::known() const {
  std::lock_guard lock(mu_);
  return by_image_.size();
}

void LoopHolders::scan_locked() {
  scanned_ = true;
  DIR* dir = ::opendir("/sys/block");
  if (!dir) return;
  while (dirent* e = ::readdir(dir)) {
    std::optional<unsigned> n = loop_number(e->d_name);
    if (!n) continue;
    if (std::optional<Bound> b = bound(*n)) by_image_[FileId{b->dev, b->ino}] = *n;
  }
  ::closedir(dir);
}

// Images whose devices freed themselves stay in the table until asked about; ask every device
// again when the table has doubled, so it holds about the devices attached, not every image
// ever mounted.
void LoopHolders::prune_locked() {
  std::erase_if(by_image_, [](const auto& entry) {
    std::optional<Bound> b = bound(entry.second);
    return !b || b->dev != entry.first.dev || b->ino != entry.first.ino;
  });
  prune_at_ = std::max(prune_from_, 2 * by_image_.size());
}

}  // namespace agentbox
