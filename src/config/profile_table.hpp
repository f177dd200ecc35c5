#pragma once
// The profiles in force: read by every request under /p/NAME, replaced whole on SIGHUP.
// Readers take a snapshot and keep it for as long as they need; a reload never changes one.
//
// Runs on: any thread (get() on the io thread and the pools, set() on the main thread at SIGHUP).
#include <memory>
#include <mutex>
#include <utility>

#include "config/profile_config.hpp"

namespace agentbox {

class ProfileTable {
 public:
  explicit ProfileTable(ProfileConfig config = {})
      : current_(std::make_shared<const ProfileConfig>(std::move(config))) {}

  std::shared_ptr<const ProfileConfig> get() const {
    std::lock_guard lock(mu_);
    return current_;
  }
  void set(ProfileConfig config) {
    auto fresh = std::make_shared<const ProfileConfig>(std::move(config));
    std::lock_guard lock(mu_);
    current_ = std::move(fresh);
  }

 private:
  mutable std::mutex mu_;  // guards current_
  std::shared_ptr<const ProfileConfig> current_;
};

}  // namespace agentbox
