#pragma once
// The cluster file: the nodes nginx hashes users onto (DESIGN §8, docs/SCALING.md) and where the
// pins live. nginx's `hash $key consistent` ring is a pure function of its `server` strings, so
// the router (`agentbox cluster nginx-conf`) and every node (`serve --cluster`) read this one
// file and cannot disagree about who owns a user.
//
//   pins = "pins.toml"                 # optional; relative to this file
//   [[node]]
//   name = "n1"                        # letters, digits, - and _
//   server = "127.0.0.1:8101"          # exactly as nginx's `server` line writes it
//   admin_url = "http://127.0.0.1:8101"  # optional; default http://SERVER
//   weight = 1                         # optional, 1..100 (nginx: 160 ring points per unit)
//   drain = true                       # optional: takes no new users (`cluster drain`)
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox {

struct ClusterNode {
  std::string name;
  std::string server;     // nginx's server string: HOST:PORT
  std::string admin_url;  // where other nodes and the CLI reach its API
  uint32_t weight = 1;
  bool drain = false;  // on the ring but skipped for new users (nginx: `down`); pins still reach it
};

// user id -> node name: accounts kept off their ring owner (a move, or `cluster add` holding
// everyone in place). Written by agentbox, read by the nodes and, as nginx's map, by the router.
using ClusterPins = std::map<std::string, std::string, std::less<>>;

struct ClusterConfig {
  std::string path;                // the file it was read from
  std::vector<ClusterNode> nodes;  // ring order is irrelevant to nginx; kept as written
  std::string pins_path;           // absolute or relative to the working directory
  ClusterPins pins;

  const ClusterNode* node(std::string_view name) const;
};

// Reads and checks the cluster file and its pins (a missing pins file is no pins). Every
// problem is an Error naming the file, the key and the line.
ClusterConfig load_cluster_config(const std::string& path);

// The pins file's text for pins: one `"user" = "node"` line each, sorted.
std::string pins_file_text(const ClusterPins& pins);

// A cluster file's text for config's nodes (and its pins file's name, when not the default).
std::string cluster_file_text(const ClusterConfig& config);
// One node's [[node]] table, its strings escaped as TOML wants.
std::string cluster_node_text(const ClusterNode& node);

}  // namespace agentbox
