#pragma once
// The placement guard of a cluster node (DESIGN §8): a request for a user this node neither
// holds nor owns is answered 421 naming the owner, and creates nothing. Without it a misrouted
// user (nginx failing over, a stale router, a client sent straight to a node) would silently get
// an empty second home. The cluster file is read again on SIGHUP (pins change with moves).
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cluster/placement.hpp"

namespace agentbox::accounts {


class PlacementGuard {
 public:
  // Reads the cluster file; node must be one of its nodes (UsageError otherwise).
  PlacementGuard(std::string cluster_file, std::string node);

  // Throws HttpError 421 "user U belongs to node n1 (127.0.0.1:8101)" unless this node owns
  // user. Asked only for users this node does not hold.
  void check_new(std::string_view user) const;

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
