#pragma once
// The MCP methods, whichever transport carries them: Streamable HTTP (mcp/mcp_routes.cpp) and
// stdio (mcp/stdio_server.hpp) check and parse a message the same way and hand it here; what
// differs between them (sessions and their header, HTTP statuses, SSE or JSON, a line on
// stdout) stays in the transport, behind an Exchange.
//
// The tools are /openapi.json's model tools (mcp/tool_table.hpp), each answered by its REST
// route's handler in memory (mcp/route_call.hpp).
//
// Runs on: the transport's thread; tool answers complete on the routes' threads.
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/services.hpp"
#include "http/router.hpp"
#include "mcp/revisions.hpp"
#include "mcp/route_call.hpp"
#include "mcp/tool_table.hpp"

namespace agentbox::mcp {

struct McpServer {
  http::Router routes;  // the REST routes the tools mirror: the same handlers, called in memory
  std::vector<Tool> tools;
  const Tool* poll = nullptr;  // get_process_status, which run_command with progress polls
  std::string version;

  nlohmann::json server_info() const;
  const Tool* find(const std::string& name) const;
};
std::shared_ptr<McpServer> make_mcp_server(const api::Services& services);

// One JSON-RPC 2.0 message, checked: a request, a notification or a response.
struct Message {
  nlohmann::json id;  // null when absent
  bool has_id = false;
  bool is_response = false;  // a result or error the client sent back
  std::string method;        // "" for a response
  nlohmann::json params;     // {} when absent
  bool request() const { return has_id && !is_response; }
};
// The message a text holds, or the error message to answer it with: -32700 when it is not JSON,
// -32600 when it is not one JSON-RPC 2.0 object (batches are not part of 2025-06-18 and later).
std::variant<Message, nlohmann::json> parse_message(std::string_view text);

// How one request's answer travels back: each transport makes its own.
struct Exchange {
  CallerContext caller;  // the headers the REST routes read: the user, the chat
  // Called once, with the answer (a result or an error message).
  std::function<void(nlohmann::json message)> reply;
  // Opens a way for notifications ahead of the answer; false when the transport or the client
  // cannot take them (then no progress is offered). Called at most once, before reply.
  std::function<bool()> open_stream;
  // A notification on that way; false when the client is gone.
  std::function<bool(nlohmann::json message)> notify;
};

// The 2025 era's methods (initialize, ping, tools/list, tools/call) for a request (has_id). A
// transport with sessions (Streamable HTTP) answers initialize and checks the session itself.
void answer_legacy(const std::shared_ptr<McpServer>& server, const Message& msg, Exchange exchange);

// The modern era's (2026-07-28: server/discover, ping, tools/list, tools/call) for a request,
// its revision from _meta and, over HTTP, the header (which the transport has checked agree).
void answer_modern(const std::shared_ptr<McpServer>& server, const Message& msg, const RequestRevision& revision,
                   Exchange exchange);

}  // namespace agentbox::mcp
