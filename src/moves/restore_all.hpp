#pragma once
// `agentbox backup restore --all` (POST /admin/backup/restore {"all": true}): a node rebuilds its
// accounts from the mirror of homes alone, after its state directory was lost (docs/SCALING.md
// "A lost disk"). For every directory of the mirror with a record (backup/mirror_record.hpp) and
// a home, that this node does not hold and may hold:
//   1. the user is refused here (503, accounts/restore_gate.hpp) and the marker is written;
//   2. the account is made with its user id, the name it had (when free) and a uid of this
//      node's range;
//   3. the mirror's copy goes into VOLUME/.restore-in/home (bytes, modes, times, symlinks as
//      links, nothing followed), re-owned to the new uid, and is renamed over the (empty) home;
//      its contexts' workspaces (MIRROR/NAME/workspaces) likewise into VOLUME/workspaces, each
//      workspace re-owned to the new uid, their parents and records to the daemon (as a move);
//   4. the marker goes: the user is served again.
// A crash anywhere leaves the marker, so the user stays refused and the next run redoes steps
// 2-4 (each repeatable). Skipped, with the reason: accounts this node holds, homes the mirror
// keeps as deleted, and on a cluster node users that another node owns (a pin or the ring) or
// that have a move tombstone or a move under way. No mirror pass runs meanwhile, and passes
// leave out the accounts being restored (their home here is empty or incomplete; the mirror's
// copy is what they are restored from, also after a crash).
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "accounts/directory.hpp"
#include "accounts/placement_guard.hpp"
#include "accounts/restore_gate.hpp"
#include "backup/mirror_record.hpp"
#include "backup/mirror_service.hpp"
#include "store/account_store.hpp"

namespace agentbox::moves {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

// What is known about one mirrored account on this node.
struct RestoreFacts {
  bool held = false;      // this node has an account for the user
  bool resuming = false;  // a restore of it began here and did not end (its marker)
  std::string refused;    // why this node must not hold the user ("" when it may)
};

struct RestoreStep {
  enum Action { restore, skip, fail } action = skip;
  std::string reason;  // for skip and fail
};

// Whether to restore a mirrored account, and if not why (pure: tests/unit).
RestoreStep plan_restore(const backup::MirroredAccount& mirrored, const RestoreFacts& facts);

struct RestoreAllContext {
  AccountStore& accounts;
  accounts::AccountDirectory& callers;
  backup::MirrorService& mirror;
  accounts::RestoreGate& gate;
  const accounts::PlacementGuard* placement = nullptr;  // a cluster node's; null otherwise
  std::function<void(std::string_view user)> moves;     // throws for a user moved or being moved; may be empty
};

// Runs the restore; answers {"restored": [{"user", "name", "uid", "files", "bytes", "resumed"}],
// "skipped": [{"user", "name", "reason"}], "errors": [{"user", "name", "detail"}], "total":
// {"restored", "skipped", "errors"}}, each list by mirror directory name ("user" null when the
// mirror has no record).
nlohmann::json restore_all(RestoreAllContext& context);

}  // namespace agentbox::moves
