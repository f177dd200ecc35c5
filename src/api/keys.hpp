#pragma once
// Per-user API keys, managed by the operator (admin key only, RouteOptions::admin):
//   POST   /admin/keys        {"user", "name"?} → 201 {"id", "key", "user", "name", "created"}:
//                             the key is in this answer only; only its SHA-256 is kept
//   GET    /admin/keys        {"keys": [{"id", "user", "name", "created"}]}, oldest first
//   DELETE /admin/keys/{id}   {"id", "user", "revoked"}: the key is refused from this moment
// A request with such a key acts as its user (http/authorize.hpp): no X-User-Id needed, one
// naming another user is 403. `user` is the external user id, as X-User-Id would name it; the
// account is made on the key's first use, as for any new user. Errors as {"detail"}: 422 a
// bad body, 404 an unknown key id.
//
// Runs on: the file pool (SQLite), then the in-memory map (http/user_keys.hpp) is changed.
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
void add_key_routes(Router& router, const Services& services);

}  // namespace agentbox::api
