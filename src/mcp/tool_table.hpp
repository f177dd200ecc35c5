#pragma once
// The MCP tools, generated from /openapi.json's model tools (api/openapi.cpp), the one table both
// lists come from: each operation becomes a tool of the same name (operationId), description
// and argument names. Its input schema is the operation's query and path parameters and the
// properties of its JSON body in one object (JSON Schema 2020-12; the body's $refs become
// $defs), requiring what the REST operation requires. Each tool remembers where its arguments
// go, so a call becomes the REST request it mirrors (mcp/route_call.hpp).
//
// Runs on: any thread (built once, read-only afterwards).
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "http/request.hpp"

namespace agentbox::mcp {

struct Tool {
  std::string name;         // the operationId
  std::string title;        // the operation's summary
  std::string description;  // what the model reads
  nlohmann::json input_schema;
  http::verb method = http::verb::get;
  std::string pattern;                  // "/execute/{id}/status"
  std::vector<std::string> path_args;   // arguments that fill {name} segments
  std::vector<std::string> query_args;  // arguments sent as query parameters
  std::vector<std::string> body_args;   // arguments that make the JSON body (empty: no body)
  // Arguments a call gets when the model leaves them out, where the MCP tool's default is not
  // the REST route's (its schema's "default" and description say so).
  nlohmann::json defaults = nlohmann::json::object();
};

// run_command's wait when an MCP call gives none: a model tool answers a short command with
// its output rather than "running" and a poll. The REST route's default stays 0 (at once).
inline constexpr int kRunCommandDefaultWait = 30;

// The tools of an OpenAPI document as openapi_document() makes it, in its order (with the MCP
// defaults above in their schemas).
std::vector<Tool> tools_of(const nlohmann::json& openapi);

// The tools/list entry of a tool.
nlohmann::json tool_json(const Tool& tool);

}  // namespace agentbox::mcp
