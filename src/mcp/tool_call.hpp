#pragma once
// tools/call: a tool's REST route called in memory (mcp/route_call.hpp) and its answer made an
// MCP tool result: the JSON as text (and as structuredContent when it is an object); an error
// status as a result with isError and the route's detail, never a JSON-RPC error (the model
// reads it and tries again). run_command with a progressToken runs as the REST client would
// drive it: started, then polled (get_process_status with the offset) until it ends or its
// wait runs out, each piece of output sent as a progress notification; the result holds all
// of it, or at the wait limit the process id to poll. Arguments the model leaves out get the
// tool's MCP defaults first (run_command's wait, mcp/tool_table.hpp).
//
// Runs on: start on the MCP request's thread; the rest on whatever thread the routes answer on.
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>

#include "http/request.hpp"
#include "http/router.hpp"
#include "mcp/route_call.hpp"
#include "mcp/tool_table.hpp"

namespace agentbox::mcp {

// A progress notification's params ({progressToken, progress, message}); false when the client
// is gone, which ends the polling (the command runs on, as a REST client's would).
using ProgressSink = std::function<bool(nlohmann::json params)>;
using ResultSink = std::function<void(nlohmann::json result)>;

// progress_token: the request's _meta.progressToken, when it has one and the answer can carry
// notifications (SSE); poll: the get_process_status tool. done is called once, with the result.
void call_tool(const http::Router& router, const Tool& tool, const nlohmann::json& arguments,
               const CallerContext& caller, std::optional<nlohmann::json> progress_token, const Tool* poll,
               ProgressSink progress, ResultSink done);

}  // namespace agentbox::mcp
