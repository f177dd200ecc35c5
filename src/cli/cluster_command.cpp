#include "cli/cluster_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/admin_client.hpp"
#include "cli/cluster_admin.hpp"
#include "cli/move_command.hpp"
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
    std::cout << node.name << " " << node.server << (pinned ? " pinned" : "") << (o.users.size() > 1 ? " " + user : "")
              << "\n";
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
  n.http_only = o.http_only;
  // A whole config finds pins.map beside it (nginx resolves includes from the config's
  // directory); an include for another nginx.conf names it absolutely.
  n.pins_map = !o.pins_map.empty() ? o.pins_map : o.http_only ? "/etc/agentbox/pins.map" : "pins.map";
  if (o.out_dir.empty()) {
    std::cout << cluster::nginx_conf(config, n);
    return 0;
  }
  write_router(o.out_dir, config, n);
  std::cout << "wrote " << o.out_dir << (o.http_only ? "/agentbox.conf" : "/nginx.conf") << " and " << o.out_dir
            << "/pins.map (" << config.nodes.size() << " nodes, " << config.pins.size() << " pins)"
            << (o.http_only ? "; include it in nginx's http block, with pins.map at " + n.pins_map
                            : "; run: nginx -p " + o.out_dir + " -c nginx.conf")
            << "\n";
  return 0;
}

// A node's admin API with the cluster's admin key, found as every admin command finds it.
AdminTarget target_of(const ClusterOptions& o, const ClusterNode& node) {
  return node_target(node, find_admin_target(o.target).admin_key);
}

struct Held {
  std::string user;
  std::string node;
};

// Where every account lives now: asked of each node, or read from --accounts (USER<TAB>NODE).
std::vector<Held> accounts_held(const ClusterConfig& config, const ClusterOptions& o) {
  std::vector<Held> held;
  if (!o.accounts_file.empty()) {
    std::istringstream lines(read_file(o.accounts_file, size_t{1} << 30));
    std::string line;
    while (std::getline(lines, line)) {
      const size_t tab = line.rfind('\t');
      if (line.empty()) continue;
      if (tab == std::string::npos) throw UsageError(o.accounts_file + ": expected USER<TAB>NODE lines");
      held.push_back({line.substr(0, tab), line.substr(tab + 1)});
    }
    return held;
  }
  for (const ClusterNode& node : config.nodes) {
    nlohmann::json answer = AdminClient(target_of(o, node)).get("/admin/accounts");
    for (const nlohmann::json& a : answer["accounts"]) held.push_back({a.value("user", ""), node.name});
  }
  return held;
}

int plan(const ClusterOptions& o) {
  ClusterConfig now = load(o);
  cluster::Placement next(load_cluster_config(o.new_file), "");
  std::map<std::string, size_t> moving_to;
  size_t total = 0, moving = 0;
  std::string out;
  for (const Held& h : accounts_held(now, o)) {
    ++total;
    const ClusterNode& owner = next.owner(h.user);
    if (owner.name == h.node) continue;
    ++moving;
    ++moving_to[owner.name];
    out += "move " + h.user + ": " + h.node + " -> " + owner.name + "\n";
  }
  std::cout << out << moving << " of " << total << " accounts would move";
  for (const auto& [node, n] : moving_to)
    std::cout << (node == moving_to.begin()->first ? " (" : ", ") << n << " to " << node;
  std::cout << (moving_to.empty() ? "" : ")") << "\n";
  return 0;
}

// Adds a node without moving anyone: every account the bigger ring would give another node is
// first pinned where it is. `cluster rebalance` moves them later, idle first.
int add(const ClusterOptions& o) {
  ClusterConfig config = load(o);
  if (config.node(o.node_name)) throw UsageError("the cluster already has a node " + o.node_name);
  ClusterConfig bigger = config;
  const ClusterNode added{o.node_name, o.node_server,
                          o.node_admin_url.empty() ? "http://" + o.node_server : o.node_admin_url, 1};
  bigger.nodes.push_back(added);
  cluster::Placement after(bigger, "");
  ClusterPins pins = config.pins;
  size_t pinned = 0;
  for (const Held& h : accounts_held(config, o)) {
    if (after.owner(h.user).name == h.node) continue;
    pins[h.user] = h.node;
    ++pinned;
  }
  std::string text = read_file(config.path);
  text += "\n" + cluster_node_text(added);
  const std::string temp_check = config.path + ".new";
  replace_file(temp_check, text);
  try {
    load_cluster_config(temp_check);  // the node's name and server checked as any cluster file's
  } catch (...) {
    ::unlink(temp_check.c_str());
    throw;
  }
  // The pins land before the node: whoever reads the cluster file in between sees nobody move.
  replace_file(config.pins_path, pins_file_text(pins));
  if (::rename(temp_check.c_str(), config.path.c_str()) == -1) throw sys_error("rename(" + config.path + ")");
  std::cout << "added " << o.node_name << " (" << o.node_server << "); pinned " << pinned
            << " accounts where they are (nobody moves). Next: start it with --cluster " << config.path << " --node "
            << o.node_name << ", send SIGHUP to the other nodes, write the router's config again and reload nginx\n";
  return 0;
}

// The accounts node holds now, from its admin API (with their last activity).
std::vector<nlohmann::json> held_on(const ClusterOptions& o, const ClusterNode& node) {
  nlohmann::json answer = AdminClient(target_of(o, node)).get("/admin/accounts");
  return answer["accounts"].get<std::vector<nlohmann::json>>();
}

// Asks every node to read the cluster file again; each must then read it as written (a node
// elsewhere needs the file given to it first).
void reload_nodes(const ClusterOptions& o, const ClusterConfig& config, const ClusterNode& changed) {
  for (const ClusterNode& n : config.nodes) {
    nlohmann::json r = AdminClient(target_of(o, n)).post("/admin/cluster/reload", nlohmann::json::object());
    bool agrees = false;
    for (const nlohmann::json& x : r["nodes"])
      agrees |= x.value("name", "") == changed.name && x.value("drain", false) == changed.drain;
    if (!agrees)
      throw UsageError("node " + n.name + " does not read " + config.path +
                       " as written here: give it this file, then run the command again");
  }
}

// Pins that say what the ring says are dropped; returns how many.
size_t drop_needless_pins(ClusterConfig& config) {
  cluster::Placement placement(config, "");
  size_t dropped = 0;
  for (auto it = config.pins.begin(); it != config.pins.end();) {
    if (placement.ring_owner(it->first).name == it->second) {
      it = config.pins.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  replace_file(config.pins_path, pins_file_text(config.pins));
  return dropped;
}

void move_one(const ClusterOptions& o, const ClusterConfig& config, const std::string& user, const std::string& from,
              const std::string& to) {
  MoveOptions m;
  m.target = o.target;
  m.user = user;
  m.to = to;
  m.from = from;
  m.cluster = config.path;
  if (!o.router_dir.empty()) m.router_dir = o.router_dir;
  move_account(m);
}

// Every account of a node goes to its owner on the ring without it; the node takes no new user
// from the start (drain = true: the nodes' guard and nginx's `down` skip it), and each of its
// accounts stays reachable on it (pinned) until its own move. Safe to run again after a failure.
int drain(const ClusterOptions& o) {
  ClusterConfig config = load(o);
  if (!config.node(o.node_name)) throw UsageError("the cluster has no node " + o.node_name);
  const auto pin_everyone_there = [&](ClusterConfig& c) {
    for (const nlohmann::json& a : held_on(o, *c.node(o.node_name))) c.pins[a.value("user", "")] = o.node_name;
    replace_file(c.pins_path, pins_file_text(c.pins));
  };
  pin_everyone_there(config);
  for (ClusterNode& n : config.nodes)
    if (n.name == o.node_name) n.drain = true;
  replace_file(config.path, cluster_file_text(config));
  reload_nodes(o, config, *config.node(o.node_name));
  // Accounts it made before it read the flag are pinned too; then the router skips it.
  config = load(o);
  pin_everyone_there(config);
  if (!o.router_dir.empty()) std::cout << rewrite_router(o.router_dir, config) << "\n";
  cluster::Placement placement(config, "");
  size_t moved = 0;
  for (const nlohmann::json& a : held_on(o, *config.node(o.node_name))) {
    const std::string user = a.value("user", "");
    move_one(o, config, user, o.node_name, placement.ring_owner(user).name);
    ++moved;
  }
  config = load(o);
  drop_needless_pins(config);
  if (!o.router_dir.empty()) std::cout << rewrite_router(o.router_dir, config) << "\n";
  std::cout << "drained " << o.node_name << ": " << moved << " accounts moved, none left there. It takes no new "
            << "users; remove it from " << config.path << " when you stop it\n";
  return 0;
}

// Pinned accounts go to their owners on the ring, the least recently active first, and their pins
// go. A pin of an account its node does not hold is dropped (nothing to move).
int rebalance(const ClusterOptions& o) {
  ClusterConfig config = load(o);
  cluster::Placement placement(config, "");
  struct Job {
    std::string user, from, to;
    double last_active;
  };
  std::vector<Job> jobs;
  std::map<std::string, std::map<std::string, double>> held;  // node -> user -> last activity
  for (const auto& [user, node] : config.pins) {
    const std::string to = placement.ring_owner(user).name;
    if (to == node) continue;
    if (!held.contains(node))
      for (const nlohmann::json& a : held_on(o, *config.node(node)))
        held[node][a.value("user", "")] = a.value("last_active", 0.0);
    if (auto it = held[node].find(user); it != held[node].end()) jobs.push_back({user, node, to, it->second});
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.last_active < b.last_active; });
  for (const Job& j : jobs) move_one(o, config, j.user, j.from, j.to);
  // The moves rewrote the pins file (each moved account pinned to its ring owner, dropped below).
  // A pin of an account its node did not hold named nothing to move: it goes too.
  config = load(o);
  for (auto it = config.pins.begin(); it != config.pins.end();) {
    auto node = held.find(it->second);
    const bool absent = node != held.end() && !node->second.contains(it->first);
    it = absent ? config.pins.erase(it) : std::next(it);
  }
  const size_t dropped = drop_needless_pins(config);
  if (!o.router_dir.empty()) std::cout << rewrite_router(o.router_dir, config) << "\n";
  std::cout << "rebalanced: " << jobs.size() << " accounts moved to their ring owners, " << dropped << " pins dropped, "
            << config.pins.size() << " left\n";
  return 0;
}

}  // namespace

void add_cluster_options(CLI::App& cluster, ClusterOptions& o) {
  cluster.require_subcommand(1);
  cluster.add_option("--cluster", o.file, "The cluster file (default $AGENTBOX_CLUSTER)")->type_name("FILE");
  auto* own = cluster.add_subcommand("owner", "Print the node that holds a user: a pin, else nginx's ring");
  own->add_option("user", o.users, "User ids (X-User-Id)")->required();
  auto* conf = cluster.add_subcommand("nginx-conf", "Write the router's nginx.conf and pins.map from the cluster file");
  conf->add_option("--out", o.out_dir, "Directory for nginx.conf and pins.map (default: nginx.conf to stdout)")
      ->type_name("DIR");
  conf->add_option("--listen", o.listen, "The router's address (default 127.0.0.1:8100)")->type_name("ADDR:PORT");
  conf->add_option("--max-body", o.max_body, "The nodes' [limits] body (default 100M)")->type_name("SIZE");
  conf->add_flag("--http-only", o.http_only,
                 "Write only the http block's part (agentbox.conf), to include in a stock nginx.conf");
  conf->add_option("--pins-map", o.pins_map,
                   "The pins map's path as nginx sees it (default: beside nginx.conf; with --http-only "
                   "/etc/agentbox/pins.map)")
      ->type_name("PATH");
  conf->add_option("--read-timeout", o.read_timeout, "Seconds an API call may be silent (default 330)")
      ->check(CLI::Range(1, 86400));
  conf->add_option("--long-timeout", o.long_timeout, "Seconds a terminal or /proxy may be idle (default 3600)")
      ->check(CLI::Range(1, 7 * 86400));
  auto* pl = cluster.add_subcommand("plan", "Show which accounts would move to match another cluster file");
  pl->add_option("--to", o.new_file, "The cluster file to compare with")->required()->type_name("FILE");
  pl->add_option("--accounts", o.accounts_file, "USER<TAB>NODE lines instead of asking the nodes")->type_name("FILE");
  auto* ad = cluster.add_subcommand("add", "Add a node; pin every account that would change node, so nobody moves");
  ad->add_option("name", o.node_name, "The new node's name")->required();
  ad->add_option("server", o.node_server, "Its address as nginx's server line writes it (HOST:PORT)")->required();
  ad->add_option("--admin-url", o.node_admin_url, "Its admin URL (default http://SERVER)");
  ad->add_option("--accounts", o.accounts_file, "USER<TAB>NODE lines instead of asking the nodes")->type_name("FILE");
  auto* dr = cluster.add_subcommand("drain", "Move every account of a node to its owner on the ring without it");
  dr->add_option("name", o.node_name, "The node")->required();
  auto* rb =
      cluster.add_subcommand("rebalance", "Move pinned accounts to their ring owners, idle first, and drop the pins");
  for (CLI::App* sub : {pl, ad, dr, rb}) add_admin_target_options(*sub, o.target);  // where the admin key is
  for (CLI::App* sub : {dr, rb})
    sub->add_option("--router-dir", o.router_dir,
                    "A router written by `cluster nginx-conf --out DIR`: written again and reloaded")
        ->type_name("DIR");
  for (CLI::App* sub : {own, conf, pl, ad, dr, rb}) sub->fallthrough();  // --cluster may come after the subcommand too
}

int run_cluster(CLI::App& cluster, ClusterOptions& o) {
  try {
    if (cluster.got_subcommand("owner")) return owner(o);
    if (cluster.got_subcommand("nginx-conf")) return nginx_conf(o);
    if (cluster.got_subcommand("plan")) return plan(o);
    if (cluster.got_subcommand("add")) return add(o);
    if (cluster.got_subcommand("drain")) return drain(o);
    if (cluster.got_subcommand("rebalance")) return rebalance(o);
  } catch (const UsageError&) {
    throw;
  } catch (const AdminError& e) {
    std::cerr << "agentbox cluster: " << e.what() << "\n";
    return 1;
  } catch (const Error& e) {
    std::cerr << "agentbox cluster: " << e.what() << "\n";
    return 2;
  }
  return 2;
}

}  // namespace agentbox::cli
