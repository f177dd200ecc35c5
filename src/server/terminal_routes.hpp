#pragma once
// /api/terminals (API.md Part A): Open WebUI's terminal pane. REST to create, list, describe and
// delete an account's terminals (exec/terminals.hpp); the WebSocket on GET /api/terminals/{id}
// attaches to one (server/terminal_socket.hpp). A plain GET of that path, without an upgrade,
// describes the terminal as REST does.
#include <string>

#include "exec/account_boxes.hpp"
#include "exec/terminals.hpp"
#include "server/caller.hpp"
#include "http/router.hpp"
#include "server/terminal_socket.hpp"

namespace agentbox::server {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct TerminalRoutesOptions {
  std::string api_key;  // what the WebSocket's auth frame must carry
  TerminalSocketOptions socket;
};

void add_terminal_routes(Router& router, CallerDirectory& callers, exec::AccountBoxes& boxes,
                         exec::Terminals& terminals, TerminalRoutesOptions options);

}  // namespace agentbox::server
