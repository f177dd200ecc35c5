#pragma once
// What the cluster commands (`agentbox cluster ...`, `agentbox accounts move`) share: a node's
// admin API as the CLI reaches it, and the files of a router written by `cluster nginx-conf
// --out DIR` (its config, pins.map and router.json, the options it was written with), which
// drain, rebalance and moves write again and reload nginx from (SIGHUP to DIR/nginx.pid: open
// connections stay on the old workers).
#include <string>

#include "cli/admin_client.hpp"
#include "cluster/nginx_conf.hpp"
#include "config/cluster_config.hpp"

namespace agentbox::cli {

// A node's admin API, from its admin_url, with the cluster's admin key (the nodes share one);
// AdminError for an admin_url that is not plain http://HOST:PORT.
AdminTarget node_target(const ClusterNode& node, const std::string& admin_key);

// Writes the router's files in dir (made if missing) for config with options n.
void write_router(const std::string& dir, const ClusterConfig& config, const cluster::NginxOptions& n);

// Writes the router in dir again for a changed config, with the options it was written with, and
// reloads the nginx running there; returns a line saying which of the two happened.
std::string rewrite_router(const std::string& dir, const ClusterConfig& config);

// Writes dir's pins.map for pins and reloads the nginx running there; AdminError when none does.
void rewrite_pins_map(const std::string& dir, const ClusterPins& pins);

}  // namespace agentbox::cli
