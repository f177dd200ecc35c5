#pragma once
// /api/terminals (API.md Part A): Open WebUI's terminal pane. REST to create, list, describe and
// delete an account's terminals (exec/terminals.hpp); the WebSocket on GET /api/terminals/{id}
// attaches to one (api/terminal_socket.hpp). A plain GET of that path, without an upgrade,
// describes the terminal as REST does.
#include <memory>
#include <string>

#include "accounts/directory.hpp"
#include "api/terminal_socket.hpp"
#include "exec/account_boxes.hpp"
#include "exec/terminals.hpp"
#include "http/router.hpp"
#include "http/user_keys.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct TerminalRoutesOptions {
  std::string api_key;                        // what the WebSocket's auth frame must carry
  std::shared_ptr<const UserKeys> user_keys;  // or a user's key, which names its user; none: no such key
  bool shared_key_in_frame = true;            // false ([auth] require_jwt): the shared key is refused there
  TerminalSocketOptions socket;
};

struct Services;
void add_terminal_routes(Router& router, const Services& services);

}  // namespace agentbox::api
