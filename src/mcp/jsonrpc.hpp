#pragma once
// JSON-RPC 2.0 as MCP's Streamable HTTP carries it: the messages (results, errors with the codes
// the spec names), and how an answer travels, as one JSON body or as an SSE stream of messages,
// as the client's Accept asks.
//
// Runs on: any thread (pure functions).
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "http/request.hpp"
#include "http/response.hpp"

namespace agentbox::mcp {

// The codes JSON-RPC 2.0 names, which MCP uses.
enum ErrorCode : int {
  kParseError = -32700,
  kInvalidRequest = -32600,
  kMethodNotFound = -32601,
  kInvalidParams = -32602,
  kInternalError = -32603,
  // MCP's own (2026-07-28): the MCP-Protocol-Version header and the _meta envelope disagree;
  // a revision the server does not speak (data: {supported, requested}).
  kHeaderMismatch = -32020,
  kUnsupportedVersion = -32022,
};

nlohmann::json result_message(const nlohmann::json& id, nlohmann::json result);
nlohmann::json error_message(const nlohmann::json& id, int code, std::string_view message,
                             nlohmann::json data = nullptr);
nlohmann::json notification(std::string_view method, nlohmann::json params);

// True when the answer should be an SSE stream: the client accepts text/event-stream and
// either not application/json or `streaming` (the answer has notifications before it).
bool answer_as_sse(const http::Request& req, bool streaming);

// One SSE event holding a message.
std::string sse_event(const nlohmann::json& message);

// A whole answer as one JSON body, or as an SSE stream of one event.
http::Response answer(const http::Request& req, const nlohmann::json& message, http::status status = http::status::ok);

// The /mcp route's error answers that no JSON-RPC handler made (401, 413, the 400 of no user):
// their {"detail": ...} becomes a JSON-RPC error message with a null id (Router::shape_errors).
void shape_jsonrpc_error(http::Response& error);

}  // namespace agentbox::mcp
