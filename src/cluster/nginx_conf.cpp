#include "cluster/nginx_conf.hpp"

#include "cluster/md5.hpp"
#include "util/random_hex.hpp"

namespace agentbox::cluster {
namespace {

std::string upstream_of(const ClusterNode& node) { return "ab_node_" + node.name; }

std::string secs(std::chrono::seconds s) { return std::to_string(s.count()) + "s"; }

}  // namespace

std::string md5_hex(std::string_view bytes) {
  const Md5Digest digest = md5(bytes);
  return hex_of(digest.data(), digest.size());
}

std::string nginx_pins_map(const ClusterPins& pins) {
  std::string out = "# agentbox pins (md5 of the user id -> node), written by agentbox\n";
  for (const auto& [user, node] : pins) out += md5_hex(user) + " ab_node_" + node + ";\n";
  return out;
}

std::string nginx_conf(const ClusterConfig& cluster, const NginxOptions& o) {
  std::string ring, nodes, names;
  for (const ClusterNode& n : cluster.nodes) {
    const std::string weight = n.weight == 1 ? "" : " weight=" + std::to_string(n.weight);
    // max_fails=0: a node that fails is never skipped for the next on the ring, which would be a
    // node without this user's files (nginx's failover is wrong for state on local disks).
    // A draining node stays on the ring, `down`: nginx walks past its points, the ring without it.
    ring += "    server " + n.server + weight + " max_fails=0" + (n.drain ? " down" : "") + ";\n";
    nodes += "  upstream " + upstream_of(n) + " {\n    server " + n.server + " max_fails=0;\n    keepalive 16;\n  }\n";
    names += "    \"" + n.server + "\" \"" + n.name + " (" + n.server + ")\";\n";
  }
  const std::string body_mb = std::to_string((o.max_body_bytes + (1 << 20) - 1) >> 20) + "m";
  std::string c;
  c += "# Written by `agentbox cluster nginx-conf` from " + cluster.path +
       ".\n# Do not edit: change the cluster file and write it again (the nodes read the same ring).\n";
  if (!o.http_only) {
    c += "load_module /usr/lib/nginx/modules/ndk_http_module.so;\n";
    c += "load_module /usr/lib/nginx/modules/ngx_http_set_misc_module.so;\n";
    c += "worker_processes auto;\npid nginx.pid;\nerror_log stderr warn;\n";
    c += "events {\n  worker_connections 8192;\n}\n";
    c += "http {\n";
    c += "  client_body_temp_path client_body;\n  proxy_temp_path proxy_temp;\n";
  }
  c += "  # The key, as the nodes read it: X-User-Id, else X-OpenWebUI-User-Id, else ?user_id=\n"
       "  # (Open WebUI's WebSockets), percent-decoded so that REST and WebSocket hash alike.\n";
  c += "  map $http_x_user_id $ab_header {\n    \"\" $http_x_openwebui_user_id;\n    default $http_x_user_id;\n  }\n";
  c += "  map $ab_header $ab_key {\n    \"\" $ab_query_user;\n    default $ab_header;\n  }\n";
  c += "  # Pins (accounts kept off their ring owner) by the md5 of the key: nginx's map keys are\n"
       "  # case-insensitive, user ids are not.\n";
  c += "  map $ab_key_md5 $ab_pool {\n    default ab_ring;\n    include " + o.pins_map + ";\n  }\n";
  c += "  map $http_upgrade $ab_connection {\n    default upgrade;\n    \"\" \"\";\n  }\n";
  c += "  map $upstream_addr $ab_down_node {\n" + names + "    default $upstream_addr;\n  }\n";
  c += "  upstream ab_ring {\n    hash $ab_key consistent;\n" + ring + "    keepalive 64;\n  }\n";
  c += nodes;
  c += "  server {\n    listen " + o.listen + ";\n    access_log off;\n";
  c += "    set_unescape_uri $ab_query_user $arg_user_id;\n    set_md5 $ab_key_md5 $ab_key;\n";
  c += "    client_max_body_size " + body_mb + ";\n";
  c += "    proxy_request_buffering off;\n    proxy_buffering off;\n";
  c += "    proxy_http_version 1.1;\n    proxy_set_header Host $http_host;\n";
  c += "    proxy_set_header Upgrade $http_upgrade;\n    proxy_set_header Connection $ab_connection;\n";
  c += "    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n";
  c += "    # A failed node answers 503 for its users; no other node gets them.\n";
  c += "    proxy_next_upstream off;\n    proxy_connect_timeout 2s;\n";
  c += "    proxy_read_timeout " + secs(o.read_timeout) + ";\n    proxy_send_timeout " + secs(o.read_timeout) + ";\n";
  // Terminals and /proxy carry WebSockets and dev servers' streams, idle far longer than an API
  // call. No trailing slash on /api/terminals: nginx would answer POST /api/terminals with a 301.
  const std::string long_idle = secs(o.long_timeout);
  for (const char* prefix : {"/api/terminals", "/proxy/"})
    c += std::string("    location ") + prefix + " {\n      proxy_read_timeout " + long_idle +
         ";\n      proxy_send_timeout " + long_idle + ";\n      proxy_pass http://$ab_pool;\n    }\n";
  c += "    location / {\n      proxy_pass http://$ab_pool;\n    }\n";
  c += "    # nginx's own 502/504 (the node is down or hung); a node's own 502/504 pass through.\n";
  c += "    error_page 502 504 = @ab_down;\n";
  c += "    location @ab_down {\n      default_type application/json;\n      add_header Retry-After " +
       std::to_string(o.retry_after.count()) + " always;\n";
  c += "      return 503 '{\"detail\":\"the agentbox node holding this user\\'s files, $ab_down_node, is not "
       "answering; nothing is lost: retry shortly\"}';\n    }\n";
  c += o.http_only ? "  }\n" : "  }\n}\n";
  return c;
}

}  // namespace agentbox::cluster
