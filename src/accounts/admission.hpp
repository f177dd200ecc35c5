#pragma once
// Whether this node may serve a user now: one decision, decide(), from the facts the node
// keeps about the user. The first case that applies answers:
//
//   case                                               answer
//   being restored from the mirror (restore_gate)      503 "user U is being restored from the backup;
//                                                          retry shortly", Retry-After 5
//   being moved away, or moved here and not yet        503 "user U is being moved to N; retry shortly",
//   activated (move_gate)                                  Retry-After 5
//   moved away: the tombstone (move_gate)              421 "user U moved to node N (SERVER)"
//   held nowhere here, and another node owns them      421 "user U belongs to node N (SERVER)"
//   (placement_guard: a pin, else the ring)                (no account is made)
//   their account is being deleted, or was in this     409 "This account is being deleted by the
//   run (its name stays refused)                           operator; try again shortly"
//   held nowhere, and the node holds max_accounts      503 "this node holds N accounts, its limit
//   (store: AccountsFull)                                  ([accounts] max_accounts = N) ..."
//   held nowhere, and the uid range is used up         503 "the uid range A-B is exhausted ... (widen
//   (store: AccountsFull)                                  it with [accounts] uid_count)"
//   held nowhere, and new_per_minute accounts were     429 "new accounts are limited to N a minute
//   made in the last minute (creation_rate)                ([accounts] new_per_minute) ...",
//                                                          Retry-After: seconds until one more
//   none of these                                      served
//
// The gates and the guard keep the facts (markers on disk, the moves tables, the cluster file);
// Admission gathers them for a user and holds the names of accounts deleted in this run. The
// last three rows are asked only when an account would be made (check_new), so they never
// refuse a known user; a creation the rate allows spends its token.
//
// Runs on: any thread (what it reads is locked briefly by its owners; deleted_ by mu_).
#include <boost/beast/http/status.hpp>

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "http/error.hpp"
#include "store/account_store.hpp"

namespace agentbox::accounts {

class CreationRate;
class MoveGate;
class PlacementGuard;
class RestoreGate;

// What the node knows about one user. The defaults are a user with no reason to be refused.
struct AdmissionFacts {
  bool restoring = false;                                     // a restore from the mirror is under way (restore_gate)
  enum class Move { none, moving, moved } move = Move::none;  // move_gate: under way, or the tombstone
  std::string move_node;                                      // where to (moving, moved)
  std::string move_server;                                    // that node's nginx server string (moved)
  bool held = true;                                           // this node has an account for the user
  // For a user not held: the node that owns them (placement_guard), when that is another node.
  std::optional<std::string> owner_node;
  std::string owner_server;
  bool deleted = false;  // the account held is being (or was) deleted in this run
  // For a user held nowhere, whose request would make an account (check_new):
  std::optional<AccountsFull> full;  // the store has no room for one more
  int creation_wait = 0;             // seconds until new_per_minute allows one more (0: now)
  uint32_t per_minute = 0;           // that limit, for the detail
};

// A refusal: the status, the {"detail"} text, and Retry-After in seconds (0: none).
struct Refusal {
  boost::beast::http::status status;
  std::string detail;
  int retry_after = 0;
};

// A refusal that says when to come back (429 with Retry-After: api/errors.cpp adds the header).
class RetryLater : public http::HttpError {
 public:
  RetryLater(http::status status, std::string detail, int retry_after)
      : HttpError(status, std::move(detail)), retry_after_(retry_after) {}
  int retry_after() const noexcept { return retry_after_; }

 private:
  int retry_after_;
};

// The table above, top to bottom. Pure: tests/unit/accounts_admission_test.cpp.
std::optional<Refusal> decide(std::string_view user, const AdmissionFacts& facts);

// Throws the refusal: 503s as BoxUnavailable (the API answers them with Retry-After,
// api/errors.cpp), others with a Retry-After as RetryLater, the rest as HttpError.
[[noreturn]] void refuse(const Refusal& refusal);

// Where the facts come from; a null source has nothing to say (a node outside a cluster has no
// moves and no placement). Each must outlive the Admission.
struct AdmissionSources {
  const RestoreGate* restoring = nullptr;
  const MoveGate* moves = nullptr;
  const PlacementGuard* placement = nullptr;
  AccountStore* accounts = nullptr;   // whether it has room for a new account (max_accounts, uids)
  CreationRate* creations = nullptr;  // [accounts] new_per_minute
};

class Admission {
 public:
  explicit Admission(AdmissionSources sources = {}) : sources_(sources) {}

  // The facts about external_id; held is the account this node holds for them (null: none).
  AdmissionFacts facts(std::string_view external_id, const Account* held) const;
  // decide() on those facts: returns when the user may be served, else throws the refusal.
  void check(std::string_view external_id, const Account* held) const;
  // For a user check() admitted who has no account yet, before one is made: the store's room,
  // then the creation rate (a token spent when allowed). Throws the refusal, counted in /metrics.
  void check_new(std::string_view external_id) const;
  // The store found no room after check_new allowed (another creation won the race): its 503.
  [[noreturn]] void refuse_full(std::string_view external_id, const AccountsFull& full) const;
  // The move case alone (restore --all asks it of users it may restore).
  void check_move(std::string_view external_id) const;
  // The deletion case alone, for an account already resolved (its volume, its home).
  void check_deleted(const Account& account) const;

  // DELETE /admin/accounts and moves away: the account is refused from here on, for the rest
  // of this run (its external id gets a new account once the old one is gone).
  void begin_delete(const std::string& name);
  bool deleted(const std::string& name) const;

 private:
  void add_move(std::string_view external_id, AdmissionFacts& facts) const;

  AdmissionSources sources_;
  mutable std::mutex mu_;          // guards deleted_
  std::set<std::string> deleted_;  // names of accounts deleted (or being) in this run
};

}  // namespace agentbox::accounts
