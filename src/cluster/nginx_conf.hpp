#pragma once
// The router's configuration, written from the cluster file (`agentbox cluster nginx-conf`) so
// that nginx's ring and the nodes' placement guard are one ring. Debian 12's nginx 1.22 with
// libnginx-mod-http-set-misc (percent-decoding of ?user_id=, and md5 for the pins map).
#include <chrono>
#include <cstdint>
#include <string>

#include "config/cluster_config.hpp"

namespace agentbox::cluster {

struct NginxOptions {
  std::string listen = "127.0.0.1:8100";
  std::string pins_map = "pins.map";        // the file the main config includes
  uint64_t max_body_bytes = 100ull << 20;   // the nodes' [limits] body
  std::chrono::seconds read_timeout{330};   // API calls: past /execute?wait=300
  std::chrono::seconds long_timeout{3600};  // terminals and /proxy: idle WebSockets
  std::chrono::seconds retry_after{5};      // told to clients while a node is down
  bool http_only = false;                   // only what goes in nginx's http block: an include
                                            // for Debian's stock nginx.conf (modules-enabled
                                            // loads set-misc), e.g. a Kubernetes ConfigMap
};

// A whole nginx.conf for a router (run with `nginx -p DIR -c nginx.conf`: pid, logs and temp
// files under DIR), or with http_only the maps, upstreams and server to include in one.
std::string nginx_conf(const ClusterConfig& cluster, const NginxOptions& options);

// The pins as nginx map entries: the md5 of each user id (so case and any byte survive nginx's
// case-insensitive, escape-ridden map keys) to its node's upstream.
std::string nginx_pins_map(const ClusterPins& pins);

// The md5 of bytes in lower-case hex, as set-misc's set_md5 writes it.
std::string md5_hex(std::string_view bytes);

}  // namespace agentbox::cluster
