#pragma once
// GET /network/log: the caller's own egress decisions, newest first (store/network_log.hpp).
#include <memory>

#include "accounts/directory.hpp"
#include "http/router.hpp"
#include "store/network_log.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
void add_network_routes(Router& router, const Services& services);

}  // namespace agentbox::api
