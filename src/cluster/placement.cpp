#include "cluster/placement.hpp"

#include "util/error.hpp"

namespace agentbox::cluster {
namespace {

std::vector<RingServer> ring_servers(const ClusterConfig& config) {
  std::vector<RingServer> servers;
  for (const ClusterNode& n : config.nodes) servers.push_back({n.server, n.weight});
  return servers;
}

}  // namespace

Placement::Placement(ClusterConfig config, std::string self)
    : config_(std::move(config)), self_(std::move(self)), ring_(ring_servers(config_)) {
  if (!self_.empty() && !config_.node(self_))
    throw UsageError("node " + self_ + " is not in the cluster file " + config_.path);
}

const ClusterNode& Placement::ring_owner(std::string_view user) const {
  // A draining node takes no new users: its points pass to the next node, as nginx's `down` does.
  return config_.nodes[ring_.owner(user, [this](size_t i) { return config_.nodes[i].drain; })];
}

const ClusterNode& Placement::owner(std::string_view user) const {
  if (auto pin = config_.pins.find(user); pin != config_.pins.end()) return *config_.node(pin->second);
  return ring_owner(user);
}

const ClusterNode& Placement::self() const { return *config_.node(self_); }

}  // namespace agentbox::cluster
