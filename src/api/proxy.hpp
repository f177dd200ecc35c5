#pragma once
// What listens in the caller's box and the way in to it:
//   GET /ports                   → {"ports":[{"port","pid","process"}]} (empty without a box)
//   * /proxy/{port}[/{path}]     → a reverse proxy to 127.0.0.1:PORT in the caller's box
//                                  (api/proxy_session.hpp); every method but CONNECT.
// The user may also come as ?user_id= (Open WebUI's proxy names the user that way); that
// parameter is the proxy's and is not passed on.
#include <optional>
#include <string>
#include <string_view>

#include "accounts/directory.hpp"
#include "api/proxy_session.hpp"
#include "config/server_config.hpp"
#include "exec/account_boxes.hpp"
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
void add_proxy_routes(Router& router, const Services& services);

// The configured [proxy] timeouts.
ProxyOptions proxy_options(const ServerConfig::Proxy& config);

// The target the box's server gets for a request target under /proxy/{port}: the rest of the
// path as it was encoded ("/" when none) and the query without user_id. Absent for a target
// that is not /proxy/{port}[/...].
std::optional<std::string> upstream_target(std::string_view request_target);

}  // namespace agentbox::api
