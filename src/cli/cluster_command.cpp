#include "cli/cluster_command.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cluster/nginx_conf.hpp"
#include "cluster/placement.hpp"
#include "config/units.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"

namespace agentbox::cli {
namespace {

ClusterConfig load(const ClusterOptions& o) {
  std::string file = o.file;
  if (file.empty()) {
    const char* env = ::getenv("AGENTBOX_CLUSTER");
    if (!env || !*env) throw UsageError("name the cluster file: --cluster FILE or AGENTBOX_CLUSTER");
    file = env;
  }
  return load_cluster_config(file);
}

int owner(const ClusterOptions& o) {
  cluster::Placement placement(load(o), "");
  for (const std::string& user : o.users) {
    const ClusterNode& node = placement.owner(user);
    const bool pinned = placement.config().pins.contains(user);
    std::cout << node.name << " " << node.server << (pinned ? " pinned" : "")
              << (o.users.size() > 1 ? " " + user : "") << "\n";
  }
  return 0;
}

int nginx_conf(const ClusterOptions& o) {
  ClusterConfig config = load(o);
  cluster::NginxOptions n;
  n.listen = o.listen;
  n.max_body_bytes = parse_size(o.max_body);
  n.read_timeout = std::chrono::seconds(o.read_timeout);
  n.long_timeout = std::chrono::seconds(o.long_timeout);
  if (o.out_dir.empty()) {
    std::cout << cluster::nginx_conf(config, n);
    return 0;
  }
  if (::mkdir(o.out_dir.c_str(), 0755) == -1 && errno != EEXIST) throw sys_error("mkdir(" + o.out_dir + ")");
  n.pins_map = "pins.map";  // beside nginx.conf: nginx reads includes relative to the config's directory
  replace_file(o.out_dir + "/pins.map", cluster::nginx_pins_map(config.pins));
  replace_file(o.out_dir + "/nginx.conf", cluster::nginx_conf(config, n));
  std::cout << "wrote " << o.out_dir << "/nginx.conf and " << o.out_dir << "/pins.map (" << config.nodes.size()
            << " nodes, " << config.pins.size() << " pins); run: nginx -p " << o.out_dir << " -c nginx.conf\n";
  return 0;
}

}  // namespace

CLI::App* add_cluster_command(CLI::App& app, ClusterOptions& o) {
  auto* cluster = app.add_subcommand("cluster", "A cluster of agentbox nodes behind nginx (docs/SCALING.md)");
  cluster->require_subcommand(1);
  cluster->add_option("--cluster", o.file, "The cluster file (default $AGENTBOX_CLUSTER)")->type_name("FILE");
  auto* own = cluster->add_subcommand("owner", "Print the node that holds a user: a pin, else nginx's ring");
  own->add_option("user", o.users, "User ids (X-User-Id)")->required();
  auto* conf = cluster->add_subcommand("nginx-conf", "Write the router's nginx.conf and pins.map from the cluster file");
  conf->add_option("--out", o.out_dir, "Directory for nginx.conf and pins.map (default: nginx.conf to stdout)")->type_name("DIR");
  conf->add_option("--listen", o.listen, "The router's address (default 127.0.0.1:8100)")->type_name("ADDR:PORT");
  conf->add_option("--max-body", o.max_body, "The nodes' [limits] body (default 100M)")->type_name("SIZE");
  conf->add_option("--read-timeout", o.read_timeout, "Seconds an API call may be silent (default 330)")
      ->check(CLI::Range(1, 86400));
  conf->add_option("--long-timeout", o.long_timeout, "Seconds a terminal or /proxy may be idle (default 3600)")
      ->check(CLI::Range(1, 7 * 86400));
  own->fallthrough();  // --cluster may come after the subcommand too
  conf->fallthrough();
  return cluster;
}

int run_cluster(CLI::App& cluster, ClusterOptions& o) {
  try {
    if (cluster.got_subcommand("owner")) return owner(o);
    if (cluster.got_subcommand("nginx-conf")) return nginx_conf(o);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    std::cerr << "agentbox cluster: " << e.what() << "\n";
    return 2;
  }
  return 2;
}

}  // namespace agentbox::cli
