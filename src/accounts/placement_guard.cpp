#include "accounts/placement_guard.hpp"

#include "http/error.hpp"

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

void PlacementGuard::check_new(std::string_view user) const {
  auto p = placement();
  const ClusterNode& owner = p->owner(user);
  if (owner.name == node_) return;
  throw http::HttpError(http::status::misdirected_request,
                  "user " + std::string(user) + " belongs to node " + owner.name + " (" + owner.server + ")");
}

}  // namespace agentbox::accounts
