#include "cli/cluster_command.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/admin_client.hpp"
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
  n.http_only = o.http_only;
  // A whole config finds pins.map beside it (nginx resolves includes from the config's
  // directory); an include for another nginx.conf names it absolutely.
  n.pins_map = !o.pins_map.empty() ? o.pins_map : o.http_only ? "/etc/agentbox/pins.map" : "pins.map";
  if (o.out_dir.empty()) {
    std::cout << cluster::nginx_conf(config, n);
    return 0;
  }
  if (::mkdir(o.out_dir.c_str(), 0755) == -1 && errno != EEXIST) throw sys_error("mkdir(" + o.out_dir + ")");
  const std::string conf = o.out_dir + (o.http_only ? "/agentbox.conf" : "/nginx.conf");
  replace_file(o.out_dir + "/pins.map", cluster::nginx_pins_map(config.pins));
  replace_file(conf, cluster::nginx_conf(config, n));
  std::cout << "wrote " << conf << " and " << o.out_dir << "/pins.map (" << config.nodes.size() << " nodes, "
            << config.pins.size() << " pins)"
            << (o.http_only ? "; include it in nginx's http block, with pins.map at " + n.pins_map
                            : "; run: nginx -p " + o.out_dir + " -c nginx.conf")
            << "\n";
  return 0;
}

// A node's admin API, from its admin_url (http://HOST:PORT; a name is resolved here).
AdminTarget target_of(const ClusterNode& node) {
  constexpr std::string_view kHttp = "http://";
  if (node.admin_url.rfind(kHttp, 0) != 0)
    throw UsageError("node " + node.name + ": only http:// admin URLs are supported, not " + node.admin_url);
  const std::string hostport = node.admin_url.substr(kHttp.size());
  const size_t colon = hostport.rfind(':');
  AdminTarget t;
  std::string host = colon == std::string::npos ? hostport : hostport.substr(0, colon);
  t.port = colon == std::string::npos ? 80 : static_cast<uint16_t>(std::stoi(hostport.substr(colon + 1)));
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
    throw AdminError("node " + node.name + ": cannot resolve " + host + ": " + ::gai_strerror(rc));
  char numeric[INET6_ADDRSTRLEN] = {};
  ::getnameinfo(found->ai_addr, found->ai_addrlen, numeric, sizeof numeric, nullptr, 0, NI_NUMERICHOST);
  ::freeaddrinfo(found);
  t.host = numeric;
  const char* key = ::getenv("AGENTBOX_ADMIN_KEY");
  if (!key || !*key) throw UsageError("set AGENTBOX_ADMIN_KEY to the cluster's admin key (the nodes share one)");
  t.admin_key = key;
  return t;
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
    nlohmann::json answer = AdminClient(target_of(node)).get("/admin/accounts");
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
  for (const auto& [node, n] : moving_to) std::cout << (node == moving_to.begin()->first ? " (" : ", ") << n << " to " << node;
  std::cout << (moving_to.empty() ? "" : ")") << "\n";
  return 0;
}

// Adds a node without moving anyone: every account the bigger ring would give another node is
// first pinned where it is. `cluster rebalance` moves them later, idle first.
int add(const ClusterOptions& o) {
  ClusterConfig config = load(o);
  if (config.node(o.node_name)) throw UsageError("the cluster already has a node " + o.node_name);
  ClusterConfig bigger = config;
  bigger.nodes.push_back({o.node_name, o.node_server, o.node_admin_url.empty() ? "http://" + o.node_server : o.node_admin_url, 1});
  cluster::Placement after(bigger, "");
  ClusterPins pins = config.pins;
  size_t pinned = 0;
  for (const Held& h : accounts_held(config, o)) {
    if (after.owner(h.user).name == h.node) continue;
    pins[h.user] = h.node;
    ++pinned;
  }
  std::string text = read_file(config.path);
  text += "\n[[node]]\nname = \"" + o.node_name + "\"\nserver = \"" + o.node_server + "\"\n";
  if (!o.node_admin_url.empty()) text += "admin_url = \"" + o.node_admin_url + "\"\n";
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
            << " accounts where they are (nobody moves). Next: start it with --cluster " << config.path
            << " --node " << o.node_name
            << ", send SIGHUP to the other nodes, write the router's config again and reload nginx\n";
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
  auto* pl = cluster->add_subcommand("plan", "Show which accounts would move to match another cluster file");
  pl->add_option("--to", o.new_file, "The cluster file to compare with")->required()->type_name("FILE");
  pl->add_option("--accounts", o.accounts_file, "USER<TAB>NODE lines instead of asking the nodes")->type_name("FILE");
  auto* ad = cluster->add_subcommand("add", "Add a node; pin every account that would change node, so nobody moves");
  ad->add_option("name", o.node_name, "The new node's name")->required();
  ad->add_option("server", o.node_server, "Its address as nginx's server line writes it (HOST:PORT)")->required();
  ad->add_option("--admin-url", o.node_admin_url, "Its admin URL (default http://SERVER)");
  ad->add_option("--accounts", o.accounts_file, "USER<TAB>NODE lines instead of asking the nodes")->type_name("FILE");
  for (CLI::App* sub : {own, conf, pl, ad}) sub->fallthrough();  // --cluster may come after the subcommand too
  return cluster;
}

int run_cluster(CLI::App& cluster, ClusterOptions& o) {
  try {
    if (cluster.got_subcommand("owner")) return owner(o);
    if (cluster.got_subcommand("nginx-conf")) return nginx_conf(o);
    if (cluster.got_subcommand("plan")) return plan(o);
    if (cluster.got_subcommand("add")) return add(o);
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
