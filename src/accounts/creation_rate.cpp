#include "accounts/creation_rate.hpp"

#include <algorithm>
#include <cmath>

namespace agentbox::accounts {

CreationRate::CreationRate(uint32_t per_minute, Clock::time_point now)
    : per_minute_(per_minute), tokens_(per_minute), last_(now) {}

int CreationRate::take(Clock::time_point now) {
  if (per_minute_ == 0) return 0;
  const double per_second = per_minute_ / 60.0;
  std::lock_guard lock(mu_);
  if (now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min<double>(per_minute_, tokens_ + elapsed * per_second);
    last_ = now;
  }
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return 0;
  }
  return std::max(1, static_cast<int>(std::ceil((1.0 - tokens_) / per_second)));
}

}  // namespace agentbox::accounts
