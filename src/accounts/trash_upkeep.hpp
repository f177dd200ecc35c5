#pragma once
// Keeps every trash in use within its bounds, on a thread of its own: items older than
// [accounts] trash_days are deleted, and a volume that is nearly full (under kFreeShare free,
// bytes or inodes: its box is about to get ENOSPC) gives up its oldest items first. Visits the
// volumes opened since the daemon started (an account's trash is not touched, or its image
// mounted, while nobody uses it). Deleted accounts' volumes (VOLUMES/.deleted) go after
// trash_days too.
//
// Runs on: its own thread ("trash-upkeep"); the constructor, stop() and run_once() (tests) from
// any other.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "accounts/directory.hpp"
#include "store/account_store.hpp"

namespace agentbox::accounts {

class TrashUpkeep {
 public:
  static constexpr double kFreeShare = 0.05;

  TrashUpkeep(AccountDirectory& callers, AccountStore& accounts, uint32_t trash_days,
              std::chrono::seconds interval = std::chrono::seconds(60));
  ~TrashUpkeep();  // stop()
  TrashUpkeep(const TrashUpkeep&) = delete;
  TrashUpkeep& operator=(const TrashUpkeep&) = delete;

  // Ends the thread once a pass under way has finished. Idempotent; not from the thread itself.
  void stop();

  // One pass over the volumes in use (the thread's; public for tests).
  void run_once();

  // Another job run at the start of each pass on this thread (the workspaces' sweep:
  // accounts/workspace_sweep.hpp), so periodic volume work shares one thread. Any thread.
  void add_pass(std::function<void()> pass);

 private:
  AccountDirectory& callers_;
  AccountStore& accounts_;
  const uint32_t trash_days_;
  const std::chrono::seconds interval_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::function<void()>> passes_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace agentbox::accounts
