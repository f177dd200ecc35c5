#include "accounts/move_gate.hpp"

#include "box/box_error.hpp"
#include "http/error.hpp"

namespace agentbox::accounts {

namespace {

// A move takes seconds to minutes; clients come back soon and find it done.
constexpr int kRetryAfterSeconds = 5;

}  // namespace

MoveGate::MoveGate(MoveStore& moves, std::string self_node) : moves_(moves), self_(std::move(self_node)) { reload(); }

void MoveGate::reload() {
  std::map<std::string, Entry, std::less<>> fresh;
  for (const MoveOut& m : moves_.outs()) fresh[m.external_id] = {m.state == "moved", m.to_node, m.to_server};
  // A move in supersedes an old tombstone of the same user (moved away, now moved back).
  for (const MoveIn& m : moves_.pending_ins()) fresh[m.external_id] = {false, self_, ""};
  std::lock_guard lock(mu_);
  refused_ = std::move(fresh);
}

void MoveGate::check(std::string_view external_id) const {
  std::lock_guard lock(mu_);
  if (refused_.empty()) return;
  auto it = refused_.find(external_id);
  if (it == refused_.end()) return;
  const std::string user(external_id);
  if (it->second.moved)
    throw http::HttpError(http::status::misdirected_request,
                    "user " + user + " moved to node " + it->second.node + " (" + it->second.server + ")");
  throw BoxUnavailable("user " + user + " is being moved to " + it->second.node + "; retry shortly",
                       kRetryAfterSeconds);
}

}  // namespace agentbox::accounts
