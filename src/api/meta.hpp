#pragma once
// The routes that describe the server and the caller's box rather than act on it:
// GET /health, GET /api/config, GET /openapi.json (public) and GET /system (the system prompt).
#include <functional>
#include <string>

#include "accounts/directory.hpp"
#include "exec/account_boxes.hpp"
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
// services.network_of(external user id, profile) describes what that user's box may reach.
void add_meta_routes(Router& router, const Services& services);

// The text of GET /system for a box: what a model should know before it runs anything.
// `tools` lists the interpreters and compilers found in the box's tree. A spec without a name
// is any user's box: the prompt names no account, home or directory.
std::string system_prompt(const BoxSpec& spec, const std::string& cwd, const std::string& os_name,
                          const std::vector<std::string>& tools, const std::string& network);

}  // namespace agentbox::api
