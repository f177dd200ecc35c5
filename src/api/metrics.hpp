#pragma once
// GET /metrics: the Prometheus exposition, on the admin key (the route's path says so, as
// every admin route's does). A scraper without the key reads GET /metrics on the [metrics]
// listen address instead (daemon/daemon.cpp), which serves nothing else.
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
void add_metrics_routes(Router& router, const Services& services);

// The page as a response (both routes): Prometheus' content type.
Response metrics_response(const std::string& page);

}  // namespace agentbox::api
