#pragma once
// Accounts that were never used again (issue 37, [accounts] forget_after_days): the volume of
// an account not seen for that many days (store: last_seen, the last request naming it) whose
// home is empty goes for good, image and mount point; its disk is free again. Empty means its
// volume holds nothing but what a new account starts with (volumes/account_volumes.hpp
// volume_empty: an empty home, trash and process log directory), so a home with anything in
// it is never forgotten, however old. Only volumes that are detached (the idle detacher let
// them go: no lease, no box) and whose account has no box starting, running or stopping are
// looked at, and the last check is made under the volume's own lock (AccountVolumes::
// forget_if_empty), the one an attach takes: a request arriving meanwhile waits, then gets a
// new volume. The account's row and uid stay (a uid is never given again): when the user comes
// back they are a known account with an empty home, made on demand as a new user's is, and
// admission does not count them as a new account.
//
// Runs on: the trash upkeep's thread, as one of its passes (accounts/trash_upkeep.hpp
// add_pass), at most once per Sources::every; the pure parts anywhere.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "store/account_store.hpp"
#include "volumes/account_volumes.hpp"

namespace agentbox::accounts {

// Whether an account last seen at `last_seen` has been idle for `days` at `now` (unix seconds).
// days = 0: never.
bool stale_account(int64_t last_seen, int64_t now, uint32_t days);

// The accounts among `accounts` whose volumes may be forgotten at `now`: stale for `days`, and
// no box of theirs in `busy` (account names). Their emptiness is the volume's to tell.
std::vector<std::string> forget_candidates(const std::vector<Account>& accounts, int64_t now, uint32_t days,
                                           const std::set<std::string>& busy);

// Volumes forgotten since the daemon started (agentbox_accounts_forgotten_total). Any thread.
uint64_t accounts_forgotten_total();

class AccountForgetting {
 public:
  struct Sources {
    uint32_t days = 0;                                           // [accounts] forget_after_days
    std::function<int64_t()> now;                                // unix seconds (a test's clock: daemon.cpp)
    std::function<std::optional<std::set<std::string>>()> busy;  // accounts with a box; nullopt: unknown now
    std::chrono::seconds every{300};                             // at most one pass this often
  };
  AccountForgetting(AccountVolumes& volumes, AccountStore& accounts, Sources sources);

  // One pass when `every` has passed since the last (the first runs at once); how many
  // volumes it forgot.
  size_t run_due();
  // One pass now.
  size_t run_once();

 private:
  AccountVolumes& volumes_;
  AccountStore& accounts_;
  Sources sources_;
  std::optional<std::chrono::steady_clock::time_point> last_;
};

}  // namespace agentbox::accounts
