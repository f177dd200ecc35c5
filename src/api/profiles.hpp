#pragma once
// /p/{profile}/...: Open WebUI's orchestrator connections (server_type "orchestrator", or a
// policy_id) put every Open Terminal route under this prefix. The router takes it off before
// routing (http/router.hpp, Router::scope_prefix), so every route, the terminal WebSocket,
// /openapi.json (the plain paths: Open WebUI adds the prefix itself) and /proxy answer under it
// as without it, with the same authentication; the profile is the request's `scope`. Here is
// what a scope may be:
//
//   an unknown profile                       404, naming the profiles the caller may use
//   a profile whose `users` leaves out the   403 (public routes, /openapi.json and /api/config,
//   user the request names                   need no user and are answered)
//
// Runs on: the API's io thread (the check), any thread (profile_box_json).
#include <nlohmann/json.hpp>

#include <optional>

#include "config/profile_config.hpp"
#include "config/profile_table.hpp"
#include "http/router.hpp"

namespace agentbox::api {

struct Services;

// Makes s.profiles the router's scope: /p/{profile}/... (no prefix taken without s.profiles).
void add_profile_scope(http::Router& router, const Services& s);

// The refusal of a request's profile, if any (the check add_profile_scope installs, alone).
std::optional<http::Response> refuse_profile(const ProfileConfig& profiles, const http::Request& req,
                                             const http::RouteOptions& options, bool authenticated);

// Why the profile of a request (req.scope) is not open to the user it names, if it is not:
// the terminal's auth frame names its user after the upgrade was let through.
std::optional<std::string> profile_closed_to(const ProfileConfig& profiles, const http::Request& req);

// The box a request gets under its profile (req.scope; "" the default): `profile`, `isolation`,
// `memory`, `cpu` (millicores), `pids`, `tmp` (bytes), `idle_timeout` (seconds). GET /usage.
// base, idle_timeout: the default box's ([box], [accounts]); profiles may be null (none).
nlohmann::json profile_box_json(const ProfileTable* profiles, const Limits& base, std::chrono::seconds idle_timeout,
                                const http::Request& req);

}  // namespace agentbox::api
