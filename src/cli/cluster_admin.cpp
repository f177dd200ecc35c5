#include "cli/cluster_admin.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "cluster/admin_url.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"

namespace agentbox::cli {
namespace {

// The pid in dir/nginx.pid, when an nginx wrote one there; 0 otherwise.
pid_t router_pid(const std::string& dir) {
  const std::optional<std::string> text = read_file_if_exists(dir + "/nginx.pid");
  const long pid = text ? std::strtol(text->c_str(), nullptr, 10) : 0;
  return pid > 1 ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

AdminTarget node_target(const ClusterNode& node, const std::string& admin_key) {
  try {
    cluster::AdminAddress a = cluster::admin_address(node);
    return AdminTarget{a.host, a.port, admin_key};
  } catch (const Error& e) {
    throw AdminError(e.what());
  }
}

void write_router(const std::string& dir, const ClusterConfig& config, const cluster::NginxOptions& n) {
  if (::mkdir(dir.c_str(), 0755) == -1 && errno != EEXIST) throw sys_error("mkdir(" + dir + ")");
  const nlohmann::json options = {{"listen", n.listen},
                                  {"pins_map", n.pins_map},
                                  {"max_body_bytes", n.max_body_bytes},
                                  {"read_timeout", n.read_timeout.count()},
                                  {"long_timeout", n.long_timeout.count()},
                                  {"http_only", n.http_only}};
  replace_file(dir + "/pins.map", cluster::nginx_pins_map(config.pins));
  replace_file(dir + (n.http_only ? "/agentbox.conf" : "/nginx.conf"), cluster::nginx_conf(config, n));
  replace_file(dir + "/router.json", options.dump(2) + "\n");
}

std::string rewrite_router(const std::string& dir, const ClusterConfig& config) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(dir + "/router.json"));
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(dir + "/router.json: " + e.what());
  }
  cluster::NginxOptions n;
  n.listen = j.value("listen", n.listen);
  n.pins_map = j.value("pins_map", n.pins_map);
  n.max_body_bytes = j.value("max_body_bytes", n.max_body_bytes);
  n.read_timeout = std::chrono::seconds(j.value("read_timeout", n.read_timeout.count()));
  n.long_timeout = std::chrono::seconds(j.value("long_timeout", n.long_timeout.count()));
  n.http_only = j.value("http_only", false);
  write_router(dir, config, n);
  const pid_t pid = router_pid(dir);
  if (pid && ::kill(pid, SIGHUP) == 0) return "router in " + dir + " written and reloaded";
  return "router in " + dir + " written (no nginx runs there: give it to the routers and reload them)";
}

void rewrite_pins_map(const std::string& dir, const ClusterPins& pins) {
  replace_file(dir + "/pins.map", cluster::nginx_pins_map(pins));
  const pid_t pid = router_pid(dir);
  if (!pid) throw AdminError("wrote " + dir + "/pins.map, but no nginx runs there (no nginx.pid)");
  if (::kill(pid, SIGHUP) != 0)
    throw AdminError("wrote " + dir + "/pins.map, but could not reload nginx (pid " + std::to_string(pid) +
                     "): " + std::strerror(errno));
}

}  // namespace agentbox::cli
