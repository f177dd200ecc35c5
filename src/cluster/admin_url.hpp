#pragma once
// Where a node's admin routes are reached: its cluster-file admin_url, "http://HOST:PORT" (plain
// HTTP, as the nodes' API is; default port 80). Used by the CLI and by a node moving an account
// to another (api/moves.hpp).
#include <cstdint>
#include <string>

#include "config/cluster_config.hpp"

namespace agentbox::cluster {

struct AdminAddress {
  std::string host;  // numeric: a name in the URL is resolved
  uint16_t port = 80;
};

// Throws Error naming the node for a URL of another shape.
AdminAddress admin_address(const ClusterNode& node);

}  // namespace agentbox::cluster
