#pragma once
// The assistant in the user's terminal (Open Terminal 0.12.4; model tools in /openapi.json):
//   GET  /user-terminal/read?lines=100        read_user_terminal: the last lines of the terminal
//                                              the user has attached in this chat, as text
//   POST /user-terminal/input {"text","enter"} send_user_terminal_input: typed into it
// "This chat" is the request's X-Session-Id (else X-Terminal-Context-Id); the terminal is the
// caller's own terminal made in that chat with a client attached now (exec::Terminals::
// attached_in_chat), so neither another chat's nor another user's is ever reached. None: 404
// with a sentence the model can act on.
#include "http/router.hpp"

namespace agentbox::api {

struct Services;
// Uses services.callers and terminals.
void add_user_terminal_routes(http::Router& router, const Services& services);

}  // namespace agentbox::api
