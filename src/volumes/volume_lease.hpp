#pragma once
// A volume in use: while a VolumeLease lives, its account's volume stays attached (mounted, its
// loop device held); the idle detacher (volumes/idle_volumes.hpp) takes only volumes no lease
// pins. AccountVolumes::lease() hands them out; a request holds one for its caller
// (accounts::Caller::volume), so every file route, upload, move and restore that resolves its
// caller pins the volume for as long as it runs. Dropping the last lease starts the idle window.
//
// Runs on: any thread (the count is AccountVolumes' table, under its lock).
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace agentbox {

struct VolumePaths {
  std::string root, home, trash, daemon;
};

// Which volumes are attached, how many leases each has and when it was last let go. Shared by
// AccountVolumes and its leases, so a lease outliving the volumes (shutdown) is harmless.
struct VolumeUses {
  using Clock = std::chrono::steady_clock;
  struct Use {
    std::shared_ptr<std::mutex> lock;  // attach, detach, release and retire of this volume take turns
    bool attached = false;
    size_t leases = 0;
    Clock::time_point used{};  // the last lease let go (or the attach)
    bool touched = false;      // a lease but the mirror's taken since the attach: maybe written
  };
  std::mutex mu;  // guards `by_name`, never held while mounting
  std::unordered_map<std::string, Use> by_name;
};

class VolumeLease {
 public:
  VolumeLease() = default;
  VolumeLease(std::shared_ptr<VolumeUses> uses, std::string name, VolumePaths paths)
      : uses_(std::move(uses)), name_(std::move(name)), paths_(std::move(paths)) {}
  VolumeLease(VolumeLease&& o) noexcept = default;
  VolumeLease& operator=(VolumeLease&& o) noexcept {
    if (this != &o) {
      let_go();
      uses_ = std::move(o.uses_);
      name_ = std::move(o.name_);
      paths_ = std::move(o.paths_);
    }
    return *this;
  }
  VolumeLease(const VolumeLease&) = delete;
  VolumeLease& operator=(const VolumeLease&) = delete;
  ~VolumeLease() { let_go(); }

  const VolumePaths& paths() const { return paths_; }
  const std::string& name() const { return name_; }

 private:
  void let_go() noexcept {
    if (!uses_) return;
    std::lock_guard lock(uses_->mu);
    auto it = uses_->by_name.find(name_);
    if (it != uses_->by_name.end() && it->second.leases > 0) {
      --it->second.leases;
      it->second.used = VolumeUses::Clock::now();
    }
    uses_.reset();
  }

  std::shared_ptr<VolumeUses> uses_;
  std::string name_;
  VolumePaths paths_;
};

}  // namespace agentbox
