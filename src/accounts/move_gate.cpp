#include "accounts/move_gate.hpp"

namespace agentbox::accounts {

MoveGate::MoveGate(MoveStore& moves, std::string self_node) : moves_(moves), self_(std::move(self_node)) { reload(); }

void MoveGate::reload() {
  std::map<std::string, Entry, std::less<>> fresh;
  for (const MoveOut& m : moves_.outs()) fresh[m.external_id] = {m.state == "moved", m.to_node, m.to_server};
  // A move in supersedes an old tombstone of the same user (moved away, now moved back).
  for (const MoveIn& m : moves_.pending_ins()) fresh[m.external_id] = {false, self_, ""};
  std::lock_guard lock(mu_);
  refused_ = std::move(fresh);
}

std::optional<MoveGate::Entry> MoveGate::find(std::string_view external_id) const {
  std::lock_guard lock(mu_);
  if (refused_.empty()) return std::nullopt;
  auto it = refused_.find(external_id);
  if (it == refused_.end()) return std::nullopt;
  return it->second;
}

}  // namespace agentbox::accounts
