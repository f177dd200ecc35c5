#pragma once
// GET /usage: what the caller's account has used. For now the model tokens the inference
// gateway counted (store/token_usage.hpp): today, the daily budget and what is left of it, and
// the recent days. ?days= (1-366, default 30). And `box`: the limits of the caller's box under
// the request's profile (api/profiles.hpp).
#include <cstdint>
#include <memory>

#include "accounts/directory.hpp"
#include "http/router.hpp"
#include "store/token_usage.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
// services.tokens null: no gateway runs, so nothing is counted (the answer says so).
void add_usage_routes(Router& router, const Services& services);

}  // namespace agentbox::api
