#include "accounts/placement_guard.hpp"

namespace agentbox::accounts {

PlacementGuard::PlacementGuard(std::string cluster_file, std::string node)
    : file_(std::move(cluster_file)), node_(std::move(node)) {
  reload();
}

void PlacementGuard::reload() {
  auto fresh = std::make_shared<const cluster::Placement>(load_cluster_config(file_), node_);
  std::lock_guard lock(mu_);
  placement_ = std::move(fresh);
}

std::shared_ptr<const cluster::Placement> PlacementGuard::placement() const {
  std::lock_guard lock(mu_);
  return placement_;
}

std::optional<ClusterNode> PlacementGuard::owner_elsewhere(std::string_view user) const {
  auto p = placement();
  const ClusterNode& owner = p->owner(user);
  if (owner.name == node_) return std::nullopt;
  return owner;
}

}  // namespace agentbox::accounts
