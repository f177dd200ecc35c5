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
//   none of these                                      served
//
// The gates and the guard keep the facts (markers on disk, the moves tables, the cluster file);
// Admission gathers them for a user and holds the names of accounts deleted in this run.
//
// Runs on: any thread (what it reads is locked briefly by its owners; deleted_ by mu_).
#include <boost/beast/http/status.hpp>

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "store/account_store.hpp"

namespace agentbox::accounts {

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
};

// A refusal: the status, the {"detail"} text, and Retry-After in seconds (0: none).
struct Refusal {
  boost::beast::http::status status;
  std::string detail;
  int retry_after = 0;
};

// The table above, top to bottom. Pure: tests/unit/accounts_admission_test.cpp.
std::optional<Refusal> decide(std::string_view user, const AdmissionFacts& facts);

// Throws the refusal: 503s as BoxUnavailable (the API answers them with Retry-After,
// api/errors.cpp), the others as HttpError.
[[noreturn]] void refuse(const Refusal& refusal);

// Where the facts come from; a null source has nothing to say (a node outside a cluster has no
// moves and no placement). Each must outlive the Admission.
struct AdmissionSources {
  const RestoreGate* restoring = nullptr;
  const MoveGate* moves = nullptr;
  const PlacementGuard* placement = nullptr;
};

class Admission {
 public:
  explicit Admission(AdmissionSources sources = {}) : sources_(sources) {}

  // The facts about external_id; held is the account this node holds for them (null: none).
  AdmissionFacts facts(std::string_view external_id, const Account* held) const;
  // decide() on those facts: returns when the user may be served, else throws the refusal.
  void check(std::string_view external_id, const Account* held) const;
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
