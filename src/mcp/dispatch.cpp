#include "mcp/dispatch.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "api/errors.hpp"
#include "api/execute.hpp"
#include "api/files.hpp"
#include "api/openapi.hpp"
#include "api/user_terminal.hpp"
#include "mcp/jsonrpc.hpp"
#include "mcp/resources.hpp"
#include "mcp/tool_call.hpp"

namespace agentbox::mcp {

namespace {

using nlohmann::json;

const char* kInstructions =
    "Your own Linux environment: run commands and read and write files in your home directory. "
    "Nothing here is shared with other users.";

json capabilities() { return {{"tools", {{"listChanged", false}}}, {"resources", resource_capabilities()}}; }

json initialize_result(const McpServer& server, const json& params) {
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

json discover_result(const McpServer& server) {
  return modern_result({{"supportedVersions", kModernVersions},
                        {"capabilities", capabilities()},
                        {"serverInfo", server.server_info()},
                        {"instructions", kInstructions}},
                       server.server_info(), /*cacheable=*/true);
}

json tools_list(const McpServer& server) {
  json list = json::array();
  for (const Tool& t : server.tools) list.push_back(tool_json(t));
  return {{"tools", std::move(list)}};
}

// tools/call: answered when the route answers; with a progress token (and a transport that
// can carry notifications) a long run_command sends its output as progress on the way.
void tools_call(const std::shared_ptr<McpServer>& server, const json& id, const json& params, bool modern,
                Exchange exchange) {
  std::string name = params.value("name", "");
  const Tool* tool = params.contains("name") && params["name"].is_string() ? server->find(name) : nullptr;
  if (!tool) {
    exchange.reply(error_message(id, kInvalidParams, "Unknown tool: " + name));
    return;
  }
  json arguments = params.value("arguments", json::object());
  if (!arguments.is_object()) {
    exchange.reply(error_message(id, kInvalidParams, "arguments must be an object"));
    return;
  }
  std::optional<json> token;
  if (params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("progressToken"))
    token = params["_meta"]["progressToken"];
  if (token && !exchange.open_stream()) token.reset();
  auto progress = [notify = exchange.notify](json p) { return notify(notification("notifications/progress", p)); };
  auto done = [server, id, modern, reply = exchange.reply](json result) {
    if (modern) result = modern_result(std::move(result), server->server_info(), /*cacheable=*/false);
    reply(result_message(id, std::move(result)));
  };
  call_tool(server->routes, *tool, arguments, exchange.caller, token, server->poll, progress, done);
}

// resources/*: the user's files (mcp/resources.hpp), answered when the route answers.
void resources_call(const std::shared_ptr<McpServer>& server, const json& id, const std::string& method,
                    const json& params, bool modern, Exchange exchange) {
  auto reply = [server, id, modern, reply = exchange.reply](RpcOutcome outcome) {
    if (outcome.code != 0) {
      reply(error_message(id, outcome.code, outcome.message));
      return;
    }
    // ttlMs 0 and cacheScope private, as every list: each user's files are their own, and change.
    if (modern) outcome.result = modern_result(std::move(outcome.result), server->server_info(), /*cacheable=*/true);
    reply(result_message(id, std::move(outcome.result)));
  };
  if (method == "resources/templates/list")
    reply({resource_templates()});
  else if (method == "resources/list")
    list_resources(server->routes, params, exchange.caller, reply);
  else
    read_resource(server->routes, params, exchange.caller, reply);
}

}  // namespace

json McpServer::server_info() const { return {{"name", "agentbox"}, {"title", "agentbox"}, {"version", version}}; }

const Tool* McpServer::find(const std::string& name) const {
  for (const Tool& t : tools)
    if (t.name == name) return &t;
  return nullptr;
}

std::shared_ptr<McpServer> make_mcp_server(const api::Services& services) {
  auto server = std::make_shared<McpServer>();
  server->routes.map_errors(api::error_map);
  api::add_execute_routes(server->routes, services);
  api::add_file_routes(server->routes, services);
  api::add_user_terminal_routes(server->routes, services);
  server->tools = tools_of(api::openapi_document(services.version));
  server->poll = server->find("get_process_status");
  server->version = services.version;
  return server;
}

std::variant<Message, json> parse_message(std::string_view text) {
  json msg = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded()) return error_message(nullptr, kParseError, "Parse error: the message is not JSON");
  if (!msg.is_object() || msg.value("jsonrpc", "") != "2.0")
    return error_message(nullptr, kInvalidRequest, "Invalid Request: one JSON-RPC 2.0 object");
  Message m;
  m.has_id = msg.contains("id");
  m.id = m.has_id ? msg["id"] : json(nullptr);
  const bool id_ok = !m.has_id || m.id.is_string() || m.id.is_number_integer();
  m.is_response = m.has_id && (msg.contains("result") || msg.contains("error")) && !msg.contains("method");
  if (!id_ok || (!m.is_response && (!msg.contains("method") || !msg["method"].is_string())))
    return error_message(id_ok ? m.id : json(nullptr), kInvalidRequest, "Invalid Request");
  m.method = m.is_response ? "" : msg["method"].get<std::string>();
  m.params = msg.value("params", json::object());
  return m;
}

void answer_modern(const std::shared_ptr<McpServer>& server, const Message& msg, const RequestRevision& revision,
                   Exchange exchange) {
  const json& id = msg.id;
  const json& params = msg.params;
  const std::string version = revision.meta.empty() ? revision.header : revision.meta;
  if (std::find(kModernVersions.begin(), kModernVersions.end(), version) == kModernVersions.end()) {
    exchange.reply(error_message(id, kUnsupportedVersion, "Unsupported protocol version: " + version,
                                 {{"supported", kModernVersions}, {"requested", version}}));
    return;
  }
  if (revision.meta.empty() || !params["_meta"].contains(kCapabilitiesMetaKey)) {
    exchange.reply(error_message(id, kInvalidParams,
                                 std::string("Missing the _meta envelope of ") + version + ": " + kVersionMetaKey +
                                     " and " + kCapabilitiesMetaKey));
    return;
  }
  const std::string& method = msg.method;
  if (method == "server/discover") {
    exchange.reply(result_message(id, discover_result(*server)));
  } else if (method == "ping") {
    exchange.reply(result_message(id, modern_result(json::object(), server->server_info(), false)));
  } else if (method == "tools/list") {
    exchange.reply(result_message(id, modern_result(tools_list(*server), server->server_info(), true)));
  } else if (method == "tools/call") {
    tools_call(server, id, params, /*modern=*/true, std::move(exchange));
  } else if (is_resource_method(method)) {
    resources_call(server, id, method, params, /*modern=*/true, std::move(exchange));
  } else {
    exchange.reply(error_message(id, kMethodNotFound, "Method not found: " + method));
  }
}

void answer_legacy(const std::shared_ptr<McpServer>& server, const Message& msg, Exchange exchange) {
  const json& id = msg.id;
  const json& params = msg.params;
  if (!params.is_object()) {
    exchange.reply(error_message(id, kInvalidParams, "params must be an object"));
    return;
  }
  const std::string& method = msg.method;
  if (method == "initialize") {
    exchange.reply(result_message(id, initialize_result(*server, params)));
  } else if (method == "ping") {
    exchange.reply(result_message(id, json::object()));
  } else if (method == "tools/list") {
    exchange.reply(result_message(id, tools_list(*server)));
  } else if (method == "tools/call") {
    tools_call(server, id, params, /*modern=*/false, std::move(exchange));
  } else if (is_resource_method(method)) {
    resources_call(server, id, method, params, /*modern=*/false, std::move(exchange));
  } else {
    exchange.reply(error_message(id, kMethodNotFound, "Method not found: " + method));
  }
}

}  // namespace agentbox::mcp
