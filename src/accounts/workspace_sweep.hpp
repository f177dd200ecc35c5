#pragma once
// The sweep of contexts' workspaces (issue 35, [profiles.NAME] keep_days and reset): a workspace
// whose context has not been used for keep_days, or that was made before its profile's last
// reset (@hourly, @daily at 00:00 UTC, @weekly on Sunday 00:00 UTC, as cron has them), goes to
// the account's trash as one item (accounts/workspaces.hpp), restorable as any item is. Only
// workspaces whose box is not running are taken; a running one waits for its box to stop.
// Visits the volumes opened since the daemon started, as the trash's upkeep does; it runs as a
// pass of that upkeep's thread (accounts/trash_upkeep.hpp), not a thread of its own.
//
// Runs on: the trash upkeep's thread (run_once); the pure parts anywhere.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "accounts/directory.hpp"
#include "accounts/workspaces.hpp"
#include "store/account_store.hpp"

namespace agentbox::accounts {

// What a profile keeps: its keep_days and the period of its reset (unset: never).
struct WorkspaceKeeping {
  std::optional<uint32_t> keep_days;
  std::optional<std::chrono::seconds> reset;
};

// The latest reset of a schedule of `period` at or before `now` (unix seconds): periods start
// at the epoch, weeks on Sunday (1970-01-04) as cron's @weekly.
int64_t last_reset(int64_t now, std::chrono::seconds period);

// Whether `w` goes to the trash at `now`: unused for keep_days, or made before the last reset.
bool workspace_due(const Workspace& w, const WorkspaceKeeping& keeping, int64_t now);

class WorkspaceSweep {
 public:
  struct Sources {
    std::function<std::map<std::string, WorkspaceKeeping>()> keeping;  // by profile, those with either
    std::function<std::set<std::string>()> busy_boxes;                 // keys of boxes starting, running or stopping
    std::function<int64_t()> now;                                      // unix seconds (a test's clock: daemon.cpp)
  };
  WorkspaceSweep(AccountDirectory& callers, AccountStore& accounts, Sources sources);

  // One pass; how many workspaces went to the trash.
  size_t run_once();

 private:
  AccountDirectory& callers_;
  AccountStore& accounts_;
  Sources sources_;
};

}  // namespace agentbox::accounts
