#pragma once
// GET /health/live and GET /health/ready (public; GET /health stays as it was, in api/meta.cpp).
// live: the API's io thread answers. ready: Services::readiness finds nothing failing (the
// store answers, the state dir takes a file, the box loop runs), else 503 naming the part.
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
void add_health_routes(Router& router, const Services& services);

}  // namespace agentbox::api
