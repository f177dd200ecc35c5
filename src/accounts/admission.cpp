#include "accounts/admission.hpp"

#include "accounts/creation_rate.hpp"
#include "accounts/move_gate.hpp"
#include "accounts/placement_guard.hpp"
#include "accounts/restore_gate.hpp"
#include "box/box_error.hpp"
#include "metrics/events.hpp"

namespace agentbox::accounts {

namespace {

using boost::beast::http::status;

// A restore or a move takes seconds to minutes; clients come back soon and find it done.
constexpr int kRetryAfterSeconds = 5;

}  // namespace

std::optional<Refusal> decide(std::string_view user_id, const AdmissionFacts& f) {
  const std::string user(user_id);
  if (f.restoring)
    return Refusal{status::service_unavailable, "user " + user + " is being restored from the backup; retry shortly",
                   kRetryAfterSeconds};
  if (f.move == AdmissionFacts::Move::moving)
    return Refusal{status::service_unavailable,
                   "user " + user + " is being moved to " + f.move_node + "; retry shortly", kRetryAfterSeconds};
  if (f.move == AdmissionFacts::Move::moved)
    return Refusal{status::misdirected_request,
                   "user " + user + " moved to node " + f.move_node + " (" + f.move_server + ")"};
  if (!f.held && f.owner_node)
    return Refusal{status::misdirected_request,
                   "user " + user + " belongs to node " + *f.owner_node + " (" + f.owner_server + ")"};
  if (f.deleted) return Refusal{status::conflict, "This account is being deleted by the operator; try again shortly"};
  if (!f.held && f.full) return Refusal{status::service_unavailable, f.full->what()};
  if (!f.held && f.creation_wait > 0)
    return Refusal{status::too_many_requests,
                   "new accounts are limited to " + std::to_string(f.per_minute) +
                       " a minute ([accounts] new_per_minute); retry in " + std::to_string(f.creation_wait) + " s",
                   f.creation_wait};
  return std::nullopt;
}

void refuse(const Refusal& r) {
  if (r.status == status::service_unavailable) throw BoxUnavailable(r.detail, r.retry_after);
  if (r.retry_after > 0) throw RetryLater(r.status, r.detail, r.retry_after);
  throw http::HttpError(r.status, r.detail);
}

namespace {

// agentbox_account_admission_refusals_total{reason}: the new-account rows of the table.
void count_refusal(const AdmissionFacts& f) {
  metrics::AdmissionRefusal why = metrics::AdmissionRefusal::rate;
  if (f.full)
    why = f.full->limit() == AccountsFull::Limit::max_accounts ? metrics::AdmissionRefusal::max_accounts
                                                               : metrics::AdmissionRefusal::uid_range;
  metrics::add(metrics::events().account_admission_refusals[static_cast<size_t>(why)]);
}

}  // namespace

void Admission::add_move(std::string_view external_id, AdmissionFacts& f) const {
  if (!sources_.moves) return;
  if (std::optional<MoveGate::Entry> move = sources_.moves->find(external_id)) {
    f.move = move->moved ? AdmissionFacts::Move::moved : AdmissionFacts::Move::moving;
    f.move_node = move->node;
    f.move_server = move->server;
  }
}

AdmissionFacts Admission::facts(std::string_view external_id, const Account* held) const {
  AdmissionFacts f;
  if (sources_.restoring) f.restoring = sources_.restoring->restoring(external_id);
  add_move(external_id, f);
  f.held = held != nullptr;
  if (!f.held && sources_.placement) {
    if (std::optional<ClusterNode> owner = sources_.placement->owner_elsewhere(external_id)) {
      f.owner_node = owner->name;
      f.owner_server = owner->server;
    }
  }
  f.deleted = held && deleted(held->name);
  return f;
}

void Admission::check(std::string_view external_id, const Account* held) const {
  if (std::optional<Refusal> r = decide(external_id, facts(external_id, held))) refuse(*r);
}

void Admission::check_new(std::string_view external_id) const {
  AdmissionFacts f{.held = false};
  if (sources_.accounts) f.full = sources_.accounts->full();
  if (!f.full && sources_.creations) {
    f.creation_wait = sources_.creations->take();
    f.per_minute = sources_.creations->per_minute();
  }
  if (std::optional<Refusal> r = decide(external_id, f)) {
    count_refusal(f);
    refuse(*r);
  }
}

void Admission::refuse_full(std::string_view external_id, const AccountsFull& full) const {
  AdmissionFacts f{.held = false, .full = full};
  count_refusal(f);
  refuse(*decide(external_id, f));
}

void Admission::check_move(std::string_view external_id) const {
  AdmissionFacts move;
  add_move(external_id, move);
  if (std::optional<Refusal> r = decide(external_id, move)) refuse(*r);
}

void Admission::check_deleted(const Account& account) const {
  if (std::optional<Refusal> r = decide(account.external_id, {.deleted = deleted(account.name)})) refuse(*r);
}

void Admission::begin_delete(const std::string& name) {
  std::lock_guard lock(mu_);
  deleted_.insert(name);
}

bool Admission::deleted(const std::string& name) const {
  std::lock_guard lock(mu_);
  return deleted_.contains(name);
}

}  // namespace agentbox::accounts
