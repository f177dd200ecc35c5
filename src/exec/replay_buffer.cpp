#include "exec/replay_buffer.hpp"

#include <algorithm>

#include "util/utf8.hpp"

namespace agentbox::exec {

ReplayBuffer::ReplayBuffer(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

void ReplayBuffer::append(std::string_view bytes) {
  if (bytes.size() >= capacity_) {
    dropped_ = dropped_ || size_ > 0 || bytes.size() > capacity_;
    ring_.assign(bytes.substr(bytes.size() - capacity_));
    start_ = 0;
    size_ = capacity_;
    return;
  }
  // Still filling: the ring is the bytes in order.
  if (ring_.size() < capacity_) {
    const size_t fits = std::min(bytes.size(), capacity_ - ring_.size());
    ring_.append(bytes.substr(0, fits));
    size_ = ring_.size();
    bytes.remove_prefix(fits);
    if (bytes.empty()) return;
  }
  // Full: each new byte overwrites the oldest.
  dropped_ = true;
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), capacity_ - start_);
    ring_.replace(start_, n, bytes.substr(0, n));
    start_ = (start_ + n) % capacity_;
    bytes.remove_prefix(n);
  }
}

std::string ReplayBuffer::contents() const {
  std::string out;
  out.reserve(size_);
  out.append(ring_, start_, size_ - start_);
  out.append(ring_, 0, start_);
  if (dropped_) out.erase(0, utf8_orphan_head(out));
  return out;
}

}  // namespace agentbox::exec
