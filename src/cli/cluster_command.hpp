#pragma once
// `agentbox cluster owner|nginx-conf|plan|add|drain|rebalance`: what the cluster file says, computed here exactly
// as the router and the nodes compute it (cluster/ring.hpp), so an operator can ask without
// either. plan, add, drain and rebalance also ask every node for the accounts it holds (GET
// /admin/accounts at its admin_url, with the cluster's admin key: AGENTBOX_ADMIN_KEY, else the
// admin_key file of --state or --config's state directory, as every admin command finds it).
#include <cstdint>
#include <string>
#include <vector>

#include "cli/admin_client.hpp"

namespace CLI {
class App;
}

namespace agentbox::cli {

struct ClusterOptions {
  std::string file;                // --cluster FILE (default $AGENTBOX_CLUSTER)
  std::vector<std::string> users;  // owner: the user ids
  std::string out_dir;             // nginx-conf: where nginx.conf and pins.map go ("" = stdout)
  std::string listen = "127.0.0.1:8100";
  std::string max_body = "100M";  // the nodes' [limits] body
  int64_t read_timeout = 330;     // API calls (past /execute?wait=300)
  int64_t long_timeout = 3600;    // terminals and /proxy
  bool http_only = false;         // nginx-conf: an include for a stock nginx.conf's http block
  std::string pins_map;           // nginx-conf: the pins map's path as nginx will see it
  std::string new_file;           // plan: the cluster file to compare with (--to)
  std::string accounts_file;      // plan: "USER<TAB>NODE" lines instead of asking the nodes
  std::string node_name;          // add: the new node's name
  std::string node_server;        // add: its nginx server string
  std::string node_admin_url;     // add: its admin URL (default http://SERVER)
  std::string router_dir;         // drain, rebalance: a router to write again and reload
  AdminTargetOptions target;      // where the cluster's admin key is
};

// Adds the subcommands and options of `cluster` to it; run_cluster() runs whichever was parsed.
void add_cluster_options(CLI::App& cluster, ClusterOptions& options);
int run_cluster(CLI::App& cluster, ClusterOptions& options);

}  // namespace agentbox::cli
