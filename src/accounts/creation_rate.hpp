#pragma once
// How fast new accounts are made ([accounts] new_per_minute): a token bucket over account
// creations, never over requests of known users. It holds at most a minute's worth of tokens and
// refills at per_minute / 60 a second, so a burst of new users up to the rate is admitted at once
// and a flood is held to the rate. accounts/admission.hpp answers an empty bucket 429 with
// Retry-After.
//
// Runs on: any thread (the bucket is locked briefly by mu_).
#include <chrono>
#include <cstdint>
#include <mutex>

namespace agentbox::accounts {

class CreationRate {
 public:
  using Clock = std::chrono::steady_clock;

  // per_minute 0: no limit (take() always allows).
  explicit CreationRate(uint32_t per_minute, Clock::time_point now = Clock::now());

  // Takes one creation at `now`: 0 when it is allowed (a token is spent), else the whole
  // seconds (at least 1) until a token will be there; nothing is spent then.
  int take(Clock::time_point now = Clock::now());
  uint32_t per_minute() const { return per_minute_; }

 private:
  const uint32_t per_minute_;
  std::mutex mu_;  // guards tokens_, last_
  double tokens_;
  Clock::time_point last_;
};

}  // namespace agentbox::accounts
