#include "cli/move_command.hpp"

#include <iostream>

#include <fmt/format.h>

#include "cli/cluster_admin.hpp"
#include "cluster/placement.hpp"
#include "config/cluster_config.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"

namespace agentbox::cli {
namespace {

std::string node_list(const ClusterConfig& config) {
  std::string out;
  for (const ClusterNode& n : config.nodes) out += (out.empty() ? "" : ", ") + n.name;
  return out;
}

const ClusterNode& node_named(const ClusterConfig& config, const std::string& name) {
  const ClusterNode* node = config.node(name);
  if (!node) throw AdminError(fmt::format("unknown node {} (the cluster has {})", name, node_list(config)));
  return *node;
}

// The pin goes into the pins file as it is now (another move may have written it meanwhile).
ClusterPins write_pin(const std::string& cluster_file, const std::string& user, const std::string& node) {
  ClusterConfig now = load_cluster_config(cluster_file);
  now.pins[user] = node;
  replace_file(now.pins_path, pins_file_text(now.pins));
  return now.pins;
}

}  // namespace

int move_account(const MoveOptions& o) {
  ClusterConfig config;
  try {
    config = load_cluster_config(o.cluster);
  } catch (const Error& e) {
    throw AdminError(e.what());
  }
  const ClusterNode& to = node_named(config, o.to);
  cluster::Placement placement(config, "");
  const ClusterNode& from = o.from ? node_named(config, *o.from) : placement.owner(o.user);
  const std::string admin_key = find_admin_target(o.target).admin_key;

  if (from.name == to.name) {
    // Pinned there: a finished move whose router reload may not have happened.
    auto pin = config.pins.find(o.user);
    if (pin == config.pins.end() || pin->second != to.name)
      throw AdminError(
          fmt::format("{} is on node {} already (its owner on the ring): nothing to move", o.user, to.name));
    if (o.router_dir) rewrite_pins_map(*o.router_dir, config.pins);
    std::cout << fmt::format("{} is on node {} already (pinned){}\n", o.user, to.name,
                             o.router_dir ? "; router reloaded" : "");
    return 0;
  }

  std::cout << fmt::format("moving {} from node {} to node {} ...\n", o.user, from.name, to.name) << std::flush;
  nlohmann::json r =
      AdminClient(node_target(from, admin_key)).post("/admin/moves", {{"user", o.user}, {"to", to.name}});
  const std::string user = r.value("user", o.user);
  std::cout << fmt::format("moved {} to node {} (account {}, uid {} there; move {})\n", user, to.name,
                           r.value("name", ""), r.value("uid", 0), r.value("id", ""));
  try {
    const ClusterPins pins = write_pin(o.cluster, user, to.name);
    std::cout << fmt::format("pinned {} to {} in {}\n", user, to.name, config.pins_path);
    if (o.router_dir) {
      rewrite_pins_map(*o.router_dir, pins);
      std::cout << fmt::format("router in {} reloaded\n", *o.router_dir);
    }
  } catch (const Error& e) {
    throw AdminError(fmt::format("{} is on node {}, but: {} (run the move again to finish)", user, to.name, e.what()));
  }
  return 0;
}

}  // namespace agentbox::cli
