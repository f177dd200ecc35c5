#pragma once
// Many boxes at once, one per account (DESIGN §3, "Lifecycle"): a box starts on first use,
// keeps the account's persistent network namespace across restarts, reports the exits of the
// commands it runs, and stops after an idle timeout (its home stays). One internal thread
// watches every box's event socket; callbacks run on that thread and must not block.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "box/box.hpp"

namespace agentbox {

struct BoxManagerOptions {
  std::string init_path = default_init_path();
  CgroupDriver* cgroups = nullptr;                 // required for specs with use_cgroup
  // Host-uid boxes' inits are cloned by a zygote (box/zygote.hpp), started on first use;
  // false: clone+exec per box.
  bool zygote = true;
  std::chrono::milliseconds idle_timeout{15 * 60 * 1000};
  std::chrono::milliseconds sweep_interval{1000};  // how often idle boxes are looked for
  // A command started through spawn() ended (status: raw wait status).
  std::function<void(const std::string& account, pid_t pid, int status)> on_exit;
  // A box went away (idle stop, stop(), or its init died).
  std::function<void(const std::string& account)> on_stopped;
};

class BoxManager {
 public:
  explicit BoxManager(BoxManagerOptions opts);
  ~BoxManager();  // stops every box
  BoxManager(const BoxManager&) = delete;
  BoxManager& operator=(const BoxManager&) = delete;

  // The account's running box, started from spec if there is none. Counts as activity.
  std::shared_ptr<Box> ensure(const std::string& account, const BoxSpec& spec);
  // The running box or nullptr.
  std::shared_ptr<Box> find(const std::string& account);
  // Spawns in the account's box (starting it if needed) and tracks the process for idle checks.
  SpawnResult spawn(const std::string& account, const BoxSpec& spec, const SpawnRequest& req,
                    std::span<const int> stdio = {});
  // Marks activity (API use), postponing the idle stop.
  void touch(const std::string& account);
  void stop(const std::string& account);
  void stop_all();
  size_t running() const;

 private:
  struct Entry {
    std::shared_ptr<Box> box;
    std::chrono::steady_clock::time_point last_active;
    int live = 0;  // spawned commands that have not exited
  };

  void watch();  // the event thread
  void add_to_epoll(const std::string& account, Box& box);
  void handle_events(const std::string& account);
  void sweep_idle();
  void remove(const std::string& account, bool notify);

  BoxManagerOptions opts_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> boxes_;              // guarded by mu_
  std::map<std::string, UniqueFd> netns_;           // guarded by mu_: outlives boxes
  std::map<int, std::string> by_event_fd_;          // guarded by mu_
  std::mutex start_mu_;                             // one start at a time per manager
  UniqueFd epoll_, wake_;
  bool stopping_ = false;                           // guarded by mu_
  std::thread thread_;
  uint64_t box_serial_ = 0;                         // guarded by start_mu_
  std::unique_ptr<Zygote> zygote_;                  // guarded by start_mu_
};

}  // namespace agentbox
