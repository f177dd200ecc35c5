#include "mcp/mcp_routes.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "accounts/user_id.hpp"
#include "api/errors.hpp"
#include "api/execute.hpp"
#include "api/files.hpp"
#include "api/openapi.hpp"
#include "api/user_terminal.hpp"
#include "http/error.hpp"
#include "http/response_writer.hpp"
#include "mcp/jsonrpc.hpp"
#include "mcp/resources.hpp"
#include "mcp/revisions.hpp"
#include "mcp/sessions.hpp"
#include "mcp/tool_call.hpp"
#include "mcp/tool_table.hpp"

namespace agentbox::mcp {

namespace {

using nlohmann::json;
using Writer = std::shared_ptr<http::ResponseWriter>;

struct Server {
  http::Router routes;  // the REST routes the tools mirror: the same handlers, called in memory
  std::vector<Tool> tools;
  const Tool* poll = nullptr;  // get_process_status, which run_command with progress polls
  Sessions sessions;
  std::string version;

  json server_info() const { return {{"name", "agentbox"}, {"title", "agentbox"}, {"version", version}}; }

  const Tool* find(const std::string& name) const {
    for (const Tool& t : tools)
      if (t.name == name) return &t;
    return nullptr;
  }
};

std::string session_header(const http::Request& req) { return std::string(req.header("Mcp-Session-Id").value_or("")); }

const char* kInstructions =
    "Your own Linux environment: run commands and read and write files in your home directory. "
    "Nothing here is shared with other users.";

json capabilities() { return {{"tools", {{"listChanged", false}}}, {"resources", resource_capabilities()}}; }

json initialize_result(const Server& server, const json& params) {
  std::string asked = params.value("protocolVersion", "");
  // An initialize naming a revision of ours gets it back, any other the newest.
  std::string version = kLegacyVersions.front();
  for (const std::string& v : kLegacyVersions)
    if (v == asked) version = v;
  return {{"protocolVersion", version},
          {"capabilities", capabilities()},
          {"serverInfo", server.server_info()},
          {"instructions", kInstructions}};
}

json discover_result(const Server& server) {
  return modern_result({{"supportedVersions", kModernVersions},
                        {"capabilities", capabilities()},
                        {"serverInfo", server.server_info()},
                        {"instructions", kInstructions}},
                       server.server_info(), /*cacheable=*/true);
}

json tools_list(const Server& server) {
  json list = json::array();
  for (const Tool& t : server.tools) list.push_back(tool_json(t));
  return {{"tools", std::move(list)}};
}

// tools/call: answered when the route answers, as JSON or (with progress) as an SSE stream.
void tools_call(const std::shared_ptr<Server>& server, const http::Request& req, const json& id, const json& params,
                bool modern, const Writer& writer) {
  std::string name = params.value("name", "");
  const Tool* tool = params.contains("name") && params["name"].is_string() ? server->find(name) : nullptr;
  if (!tool) {
    writer->send(answer(req, error_message(id, kInvalidParams, "Unknown tool: " + name)));
    return;
  }
  json arguments = params.value("arguments", json::object());
  if (!arguments.is_object()) {
    writer->send(answer(req, error_message(id, kInvalidParams, "arguments must be an object")));
    return;
  }
  std::optional<json> token;
  if (params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("progressToken"))
    token = params["_meta"]["progressToken"];
  const bool stream = token && answer_as_sse(req, true);
  if (!stream) token.reset();
  if (stream) {
    http::Response head;
    head.headers.set(http::field::content_type, "text/event-stream");
    head.headers.set(http::field::cache_control, "no-cache");
    writer->begin_chunked(std::move(head));
  }
  auto progress = [writer](json p) {
    return writer->write_chunk(sse_event(notification("notifications/progress", p)));
  };
  auto done = [server, writer, id, stream, modern,
               accept = std::string(req.header("Accept").value_or(""))](json result) {
    if (modern) result = modern_result(std::move(result), server->server_info(), /*cacheable=*/false);
    json message = result_message(id, std::move(result));
    if (stream) {
      writer->write_chunk(sse_event(message));
      writer->end_chunked();
      return;
    }
    http::Request shape;  // answer() reads only the Accept
    shape.headers.set(http::field::accept, accept);
    writer->send(answer(shape, message));
  };
  call_tool(server->routes, *tool, arguments, context_of(req), token, server->poll, progress, done);
}

// resources/*: the user's files (mcp/resources.hpp), answered when the route answers.
void resources_call(const std::shared_ptr<Server>& server, const http::Request& req, const json& id,
                    const std::string& method, const json& params, bool modern, const Writer& writer) {
  auto reply = [server, writer, id, modern,
                accept = std::string(req.header("Accept").value_or(""))](RpcOutcome outcome) {
    http::Request shape;  // answer() reads only the Accept
    shape.headers.set(http::field::accept, accept);
    if (outcome.code != 0) {
      writer->send(answer(shape, error_message(id, outcome.code, outcome.message)));
      return;
    }
    // ttlMs 0 and cacheScope private, as every list: each user's files are their own, and change.
    if (modern) outcome.result = modern_result(std::move(outcome.result), server->server_info(), /*cacheable=*/true);
    writer->send(answer(shape, result_message(id, std::move(outcome.result))));
  };
  if (method == "resources/templates/list")
    reply({resource_templates()});
  else if (method == "resources/list")
    list_resources(server->routes, params, context_of(req), reply);
  else
    read_resource(server->routes, params, context_of(req), reply);
}

// The modern era (2026-07-28): no session; the revision in every request's _meta, matching its
// header when both are sent. id: absent for a notification or a response (202, no answer).
void post_modern(const std::shared_ptr<Server>& server, const http::Request& req, const RequestRevision& revision,
                 const std::optional<json>& id, const std::string& method, const json& params, const Writer& writer) {
  if (!id) {
    writer->send(http::Response::empty(http::status::accepted));
    return;
  }
  if (!revision.header.empty() && !revision.meta.empty() && revision.header != revision.meta) {
    writer->send(answer(req,
                        error_message(*id, kHeaderMismatch,
                                      "MCP-Protocol-Version (" + revision.header + ") and _meta's " + kVersionMetaKey +
                                          " (" + revision.meta + ") disagree"),
                        http::status::bad_request));
    return;
  }
  const std::string version = revision.meta.empty() ? revision.header : revision.meta;
  if (std::find(kModernVersions.begin(), kModernVersions.end(), version) == kModernVersions.end()) {
    writer->send(answer(req, error_message(*id, kUnsupportedVersion, "Unsupported protocol version: " + version,
                                           {{"supported", kModernVersions}, {"requested", version}})));
    return;
  }
  if (revision.meta.empty() || !params["_meta"].contains(kCapabilitiesMetaKey)) {
    writer->send(answer(req, error_message(*id, kInvalidParams,
                                           std::string("Missing the _meta envelope of ") + version + ": " +
                                               kVersionMetaKey + " and " + kCapabilitiesMetaKey)));
    return;
  }
  if (method == "server/discover") {
    writer->send(answer(req, result_message(*id, discover_result(*server))));
  } else if (method == "ping") {
    writer->send(answer(req, result_message(*id, modern_result(json::object(), server->server_info(), false))));
  } else if (method == "tools/list") {
    writer->send(answer(req, result_message(*id, modern_result(tools_list(*server), server->server_info(), true))));
  } else if (method == "tools/call") {
    tools_call(server, req, *id, params, /*modern=*/true, writer);
  } else if (is_resource_method(method)) {
    resources_call(server, req, *id, method, params, /*modern=*/true, writer);
  } else {
    writer->send(answer(req, error_message(*id, kMethodNotFound, "Method not found: " + method)));
  }
}

void post_mcp(const std::shared_ptr<Server>& server, const http::Request& req, const Writer& writer) {
  const std::string user = accounts::user_id_of(req);  // 400 without a user, as the REST API
  json msg = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded()) {
    writer->send(answer(req, error_message(nullptr, kParseError, "Parse error: the body is not JSON"),
                        http::status::bad_request));
    return;
  }
  // JSON-RPC batches are not part of 2025-06-18 and later: one message a request.
  if (!msg.is_object() || msg.value("jsonrpc", "") != "2.0") {
    writer->send(answer(req, error_message(nullptr, kInvalidRequest, "Invalid Request: one JSON-RPC 2.0 object"),
                        http::status::bad_request));
    return;
  }
  const bool has_id = msg.contains("id");
  const json id = has_id ? msg["id"] : json(nullptr);
  const bool id_ok = !has_id || id.is_string() || id.is_number_integer();
  const bool is_response = has_id && (msg.contains("result") || msg.contains("error")) && !msg.contains("method");
  if (!id_ok || (!is_response && (!msg.contains("method") || !msg["method"].is_string()))) {
    writer->send(answer(req, error_message(id_ok ? id : json(nullptr), kInvalidRequest, "Invalid Request"),
                        http::status::bad_request));
    return;
  }
  const std::string method = is_response ? "" : msg["method"].get<std::string>();
  const json params = msg.value("params", json::object());

  const RequestRevision revision = revision_of(req, params);
  if (revision.modern() || method == "server/discover") {
    post_modern(server, req, revision, has_id && !is_response ? std::optional<json>(id) : std::nullopt, method, params,
                writer);
    return;
  }

  if (method == "initialize") {
    if (!has_id) {
      writer->send(answer(req, error_message(nullptr, kInvalidRequest, "initialize is a request: it needs an id"),
                          http::status::bad_request));
      return;
    }
    http::Response r = answer(req, result_message(id, initialize_result(*server, params)));
    r.headers.set("Mcp-Session-Id", server->sessions.open(user));
    writer->send(std::move(r));
    return;
  }
  // Every other message belongs to a session of this user's (404 as the spec has it: the client
  // starts a new one; a session of another user's is not found either).
  const std::string session = session_header(req);
  if (session.empty())
    throw http::HttpError(http::status::bad_request, "Missing Mcp-Session-Id header: initialize first");
  if (!server->sessions.belongs(session, user)) throw http::HttpError(http::status::not_found, "Session not found");

  if (!has_id || is_response) {  // a notification or a response: nothing to answer
    writer->send(http::Response::empty(http::status::accepted));
    return;
  }
  if (!params.is_object()) {
    writer->send(answer(req, error_message(id, kInvalidParams, "params must be an object")));
    return;
  }
  if (method == "ping") {
    writer->send(answer(req, result_message(id, json::object())));
  } else if (method == "tools/list") {
    writer->send(answer(req, result_message(id, tools_list(*server))));
  } else if (method == "tools/call") {
    tools_call(server, req, id, params, /*modern=*/false, writer);
  } else if (is_resource_method(method)) {
    resources_call(server, req, id, method, params, /*modern=*/false, writer);
  } else {
    writer->send(answer(req, error_message(id, kMethodNotFound, "Method not found: " + method)));
  }
}

}  // namespace

void add_mcp_routes(http::Router& router, const api::Services& services) {
  auto server = std::make_shared<Server>();
  server->routes.map_errors(api::error_map);
  api::add_execute_routes(server->routes, services);
  api::add_file_routes(server->routes, services);
  api::add_user_terminal_routes(server->routes, services);
  server->tools = tools_of(api::openapi_document(services.version));
  server->poll = server->find("get_process_status");
  server->version = services.version;

  router.shape_errors("/mcp", shape_jsonrpc_error);
  router.add_async(http::verb::post, "/mcp",
                   [server](const http::Request& req, Writer writer) { post_mcp(server, req, writer); },
                   {.body_limit = kMessageLimit});
  router.add(http::verb::delete_, "/mcp", [server](const http::Request& req) {
    const std::string user = accounts::user_id_of(req);
    if (!server->sessions.close(session_header(req), user))
      throw http::HttpError(http::status::not_found, "Session not found");
    return http::Response::empty();
  });
}

}  // namespace agentbox::mcp
