#pragma once
// Detaches the account volumes nothing uses ([accounts] volume_idle, attached): a volume no
// lease holds (volumes/volume_lease.hpp: no request, upload, move or restore under way) and
// whose account runs no box (no process, no terminal) is unmounted once it has been idle for
// `idle`, and, while more than `max_attached` volumes are attached, the least recently used such
// volumes go first whatever their idle time. Volumes of running boxes are never taken, so only
// they can keep the count above the cap. An unmount is never forced: a volume something still
// holds a file in stays, and is tried again after another idle window. Whatever needs a
// detached volume attaches it again (AccountVolumes::lease).
//
// Runs on: a thread of its own ("idle-volumes"), which detaches; stop() and the destructor on
// the thread that owns it.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "volumes/account_volumes.hpp"

namespace agentbox {

struct IdleVolumePolicy {
  std::chrono::seconds idle{300};  // [accounts] volume_idle
  size_t max_attached = 0;         // [accounts] attached; 0: no cap
  std::chrono::milliseconds tick{1000};
};

class IdleVolumes {
 public:
  using Clock = VolumeUses::Clock;
  // The accounts whose volumes stay (a box starting, running or stopping); nullopt when that
  // cannot be told now: nothing is detached this round. Called on the detaching thread.
  using Pinned = std::function<std::optional<std::set<std::string>>()>;
  // Called before an unmount, with the account's name: the descriptors kept in the volume go.
  using BeforeDetach = std::function<void(const std::string&)>;

  // Starts the thread (not for a volume backend with nothing to detach: the caller decides).
  IdleVolumes(AccountVolumes& volumes, IdleVolumePolicy policy, Pinned pinned, BeforeDetach before_detach);
  ~IdleVolumes();
  IdleVolumes(const IdleVolumes&) = delete;
  IdleVolumes& operator=(const IdleVolumes&) = delete;
  void stop();

  // One round at `now`; how many volumes it detached. The thread calls it every tick.
  size_t run_once(Clock::time_point now);

 private:
  AccountVolumes& volumes_;
  const IdleVolumePolicy policy_;
  Pinned pinned_;
  BeforeDetach before_detach_;
  std::mutex mu_;  // guards stopping_
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace agentbox
