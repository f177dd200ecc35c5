#pragma once
// The placement of a cluster node (DESIGN §8): who owns a user this node does not hold. Admission
// (accounts/admission.hpp) answers such a request 421 naming the owner, and creates nothing.
// Without it a misrouted user (nginx failing over, a stale router, a client sent straight to a
// node) would silently get an empty second home. The cluster file is read again on SIGHUP (pins
// change with moves).
//
// Runs on: any thread (the placement is swapped whole under mu_).
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/placement.hpp"

namespace agentbox::accounts {

class PlacementGuard {
 public:
  // Reads the cluster file; node must be one of its nodes (UsageError otherwise).
  PlacementGuard(std::string cluster_file, std::string node);

  // The node that owns user when that is not this node (a pin, else the ring); nullopt when
  // this node owns them. Asked only for users this node does not hold.
  std::optional<ClusterNode> owner_elsewhere(std::string_view user) const;

  // Reads the cluster file again; on an error the old placement stays and the error is thrown.
  void reload();

  std::string node() const { return node_; }
  std::shared_ptr<const cluster::Placement> placement() const;

 private:
  std::string file_;
  std::string node_;
  mutable std::mutex mu_;
  std::shared_ptr<const cluster::Placement> placement_;
};

}  // namespace agentbox::accounts
