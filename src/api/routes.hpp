#pragma once
// Every route of the API, registered in one place (api/routes.cpp lists them on one screen).
#include "api/services.hpp"
#include "http/router.hpp"

namespace agentbox::api {

// Registers every feature's table of named handlers on router, over services (the cluster's
// routes only on a cluster node).
void register_routes(http::Router& router, const Services& services);

}  // namespace agentbox::api
