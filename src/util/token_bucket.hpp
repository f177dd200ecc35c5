#pragma once
// A token bucket: `rate` tokens a second flow in, at most `burst` are held, and each event
// spends one. Events may come in a burst of up to `burst` at once, then at `rate` a second.
// Not thread-safe: the owner guards it. Time is passed in, so tests need no sleeping.
#include <algorithm>
#include <chrono>

namespace agentbox {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts full.
  TokenBucket(double rate, double burst, Clock::time_point now = Clock::now())
      : rate_(rate), burst_(burst), tokens_(burst), at_(now) {}

  // Spends one token if there is one; false (nothing spent) otherwise.
  bool take(Clock::time_point now = Clock::now()) {
    if (now > at_) {
      tokens_ = tokens_at(now);
      at_ = now;
    }
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }
  // Full again by now: an owner may forget such a bucket, as a new one starts full.
  bool full(Clock::time_point now = Clock::now()) const { return tokens_at(now) >= burst_; }

 private:
  double tokens_at(Clock::time_point now) const {
    if (now <= at_) return tokens_;
    return std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - at_).count());
  }

  double rate_, burst_, tokens_;
  Clock::time_point at_;
};

}  // namespace agentbox
