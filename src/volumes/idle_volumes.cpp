#include "volumes/idle_volumes.hpp"

#include <exception>
#include <vector>

#include "util/log.hpp"
#include "util/thread_name.hpp"

namespace agentbox {

IdleVolumes::IdleVolumes(AccountVolumes& volumes, IdleVolumePolicy policy, Pinned pinned, BeforeDetach before_detach)
    : volumes_(volumes), policy_(policy), pinned_(std::move(pinned)), before_detach_(std::move(before_detach)) {
  thread_ = std::thread([this] {
    name_this_thread("idle-volumes");
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, policy_.tick, [this] { return stopping_; })) {
      lock.unlock();
      try {
        run_once(Clock::now());
      } catch (const std::exception& e) {
        log::warn("volumes", "idle volumes: {}", e.what());
      }
      lock.lock();
    }
  });
}

IdleVolumes::~IdleVolumes() { stop(); }

void IdleVolumes::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

size_t IdleVolumes::run_once(Clock::time_point now) {
  const std::vector<AccountVolumes::Unleased> unleased = volumes_.unleased();  // oldest first
  if (unleased.empty()) return 0;
  const size_t attached = volumes_.attached();
  size_t excess = policy_.max_attached && attached > policy_.max_attached ? attached - policy_.max_attached : 0;
  const auto idle = [&](const AccountVolumes::Unleased& v) { return now - v.used >= policy_.idle; };
  if (excess == 0 && !idle(unleased.front())) return 0;  // the oldest is not idle: none is
  std::optional<std::set<std::string>> pinned = pinned_ ? pinned_() : std::set<std::string>{};
  if (!pinned) return 0;
  size_t detached = 0;
  for (const AccountVolumes::Unleased& v : unleased) {
    if (excess == 0 && !idle(v)) break;
    if (pinned->contains(v.name)) continue;
    if (!volumes_.detach_unused(v.name, v.used, before_detach_)) continue;
    ++detached;
    if (excess > 0) --excess;
    log::debug("volumes", "volume of {} detached (idle)", v.name);
  }
  return detached;
}

}  // namespace agentbox
