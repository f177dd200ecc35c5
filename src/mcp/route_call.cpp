#include "mcp/route_call.hpp"

#include <cctype>
#include <string>
#include <utility>

#include "http/error.hpp"
#include "http/in_memory_call.hpp"

namespace agentbox::mcp {

namespace {

using nlohmann::json;

std::string text_of(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

// The request target ("/execute/abc/status?wait=5") the arguments make.
std::string target_of(const Tool& tool, const json& args) {
  std::string path = tool.pattern;
  for (const std::string& name : tool.path_args) {
    std::string key = "{" + name + "}";
    auto at = path.find(key);
    std::string value = args.contains(name) ? text_of(args[name]) : "";
    if (at != std::string::npos) path.replace(at, key.size(), http::percent_encode(value));
  }
  std::string query;
  auto add = [&](const std::string& name, const json& value) {
    query += query.empty() ? '?' : '&';
    query += http::percent_encode(name) + "=" + http::percent_encode(text_of(value));
  };
  for (const std::string& name : tool.query_args) {
    if (!args.contains(name) || args[name].is_null()) continue;
    if (args[name].is_array())
      for (const json& item : args[name]) add(name, item);
    else
      add(name, args[name]);
  }
  return path + query;
}

}  // namespace

CallerContext context_of(const http::Request& outer) {
  CallerContext c;
  for (const auto& field : outer.headers) {
    auto name = field.name();
    if (name == http::field::content_length || name == http::field::content_type || name == http::field::accept ||
        name == http::field::transfer_encoding)
      continue;
    c.headers.insert(field.name_string(), field.value());
  }
  // Open WebUI names the chat to an MCP server as X-OpenWebUI-Chat-Id (to a terminal server as
  // X-Session-Id): either scopes the cwd, as X-Session-Id does in the REST API.
  auto chat = outer.header("X-OpenWebUI-Chat-Id");
  auto session = outer.header("X-Session-Id");
  if (chat && !chat->empty() && (!session || session->empty())) c.headers.set("X-Session-Id", *chat);
  c.listener_tag = outer.listener_tag;
  c.remote_address = outer.remote_address;
  c.local_address = outer.local_address;
  c.scope = outer.scope;
  return c;
}

void call_route(const http::Router& router, const Tool& tool, const json& arguments, const CallerContext& caller,
                RouteDone done) {
  http::Request req;
  req.method = tool.method;
  req.target = target_of(tool, arguments);
  if (!http::parse_target(req.target)) {
    done(http::error_response(http::status::unprocessable_entity, "Invalid arguments"));
    return;
  }
  const http::Route* route = http::route_in_memory(router, req);
  if (!route) {
    done(http::error_response(http::status::not_found, "No such operation: " + tool.name));
    return;
  }
  // Who is calling and in which chat: the MCP request's own headers (the key was checked on it).
  req.headers = caller.headers;
  if (!tool.body_args.empty()) {
    json body = json::object();
    for (const std::string& name : tool.body_args)
      if (arguments.contains(name)) body[name] = arguments[name];
    req.body = http::dump_json(body);
    req.body_size = req.body.size();
    req.headers.set(http::field::content_type, "application/json");
  }
  req.listener_tag = caller.listener_tag;
  req.remote_address = caller.remote_address;
  req.local_address = caller.local_address;
  req.scope = caller.scope;

  http::call_in_memory(router, *route, req, "MCP " + tool.name, [done = std::move(done)](http::InMemoryReply r) {
    if (r.aborted) {
      done(http::error_response(http::status::internal_server_error, "The operation was cut short"));
      return;
    }
    done(std::move(r.response));
  });
}

}  // namespace agentbox::mcp
