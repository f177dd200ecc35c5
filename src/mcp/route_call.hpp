#pragma once
// A tool call made as the REST request it mirrors, in memory: the tool's arguments become the
// request's path, query and JSON body, the caller's headers (key, user, chat) are the MCP
// request's, and the route's own handler answers in memory (http/in_memory_call.hpp: no
// socket). So exec and files have one implementation, and a tool's answer is
// exactly what the REST client would get.
//
// Runs on: call() on the MCP request's thread; `done` on whatever thread the route answers on.
#include <nlohmann/json.hpp>

#include <functional>
#include <string>

#include "http/request.hpp"
#include "http/response.hpp"
#include "http/router.hpp"
#include "mcp/tool_table.hpp"

namespace agentbox::mcp {

using RouteDone = std::function<void(http::Response)>;

// What a tool call takes from the MCP request: its headers (key, user, chat: X-Session-Id, or
// Open WebUI's X-OpenWebUI-Chat-Id in its place) and where it came from. Copyable, so a call that
// polls can keep it.
struct CallerContext {
  http::fields headers;
  std::string listener_tag;
  std::string remote_address;
  std::string local_address;
  std::string scope;  // the profile of /p/NAME/mcp: the inner routes run under it too
};
CallerContext context_of(const http::Request& outer);

// Arguments of the wrong JSON type are passed on as text; the route's own checks answer them
// (422), as they would a REST client's. A route the table lacks answers 404.
void call_route(const http::Router& router, const Tool& tool, const nlohmann::json& arguments,
                const CallerContext& caller, RouteDone done);

}  // namespace agentbox::mcp
