#pragma once
// The user's files as MCP resources, file:// URIs of the paths the box sees (file:///home/alice/
// notes.md): resources/list pages through the files of the home (the glob_search route, files
// only, in its walk order, at most its 500 matches), resources/templates/list offers
// file:///{path} for any other, and resources/read answers a file's bytes as GET /files/view
// serves them (text when they are UTF-8, else base64), up to kResourceReadLimit. Each is the
// REST request it mirrors (mcp/route_call), made as the caller, so a path outside the caller's
// home is not found, as in the REST API.
//
// Runs on: the MCP request's thread; done on whatever thread the route answers on.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "http/router.hpp"
#include "mcp/route_call.hpp"

namespace agentbox::mcp {

inline constexpr int kResourcePage = 100;                        // resources per resources/list page
inline constexpr std::uint64_t kResourceReadLimit = 8ull << 20;  // bytes: base64 stays under the message limit
inline constexpr int kResourceNotFound = -32002;                 // MCP's code for an unknown resource

// A JSON-RPC outcome: a result, or (code != 0) an error.
struct RpcOutcome {
  nlohmann::json result;
  int code = 0;
  std::string message;
};
using OutcomeSink = std::function<void(RpcOutcome)>;

// A box path as a file URI ("/home/a/x y" → "file:///home/a/x%20y"), and back: the absolute
// path a file:///… (or file://localhost/…) URI names, decoded; absent for any other URI, a bad
// escape, a NUL, or a query or fragment (an escaped '?' or '#' is part of the name).
std::string file_uri_of(std::string_view path);
std::optional<std::string> path_of_file_uri(std::string_view uri);

// resources/list, resources/read, resources/templates/list.
bool is_resource_method(const std::string& method);
// The capabilities entry.
nlohmann::json resource_capabilities();
// resources/templates/list's result.
nlohmann::json resource_templates();
// resources/list: params {cursor?}; the cursor is the one the previous page gave.
void list_resources(const http::Router& router, const nlohmann::json& params, const CallerContext& caller,
                    OutcomeSink done);
// resources/read: params {uri}.
void read_resource(const http::Router& router, const nlohmann::json& params, const CallerContext& caller,
                   OutcomeSink done);

}  // namespace agentbox::mcp
