#include "mcp/jsonrpc.hpp"

#include <optional>
#include <utility>

namespace agentbox::mcp {

using nlohmann::json;

json result_message(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json error_message(const json& id, int code, std::string_view message, json data) {
  json error = {{"code", code}, {"message", std::string(message)}};
  if (!data.is_null()) error["data"] = std::move(data);
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

json notification(std::string_view method, json params) {
  return {{"jsonrpc", "2.0"}, {"method", std::string(method)}, {"params", std::move(params)}};
}

bool answer_as_sse(const http::Request& req, bool streaming) {
  std::string accept(req.header("Accept").value_or(""));
  bool sse = accept.find("text/event-stream") != std::string::npos;
  bool json_ok =
      accept.empty() || accept.find("application/json") != std::string::npos || accept.find("*/*") != std::string::npos;
  return sse && (streaming || !json_ok);
}

std::string sse_event(const json& message) { return "event: message\ndata: " + http::dump_json(message) + "\n\n"; }

http::Response answer(const http::Request& req, const json& message, http::status status) {
  if (!answer_as_sse(req, false)) return http::Response::json(message, status);
  http::Response r = http::Response::text(sse_event(message), status, "text/event-stream");
  r.headers.set(http::field::cache_control, "no-cache");
  return r;
}

void shape_jsonrpc_error(http::Response& error) {
  if (!error.error) return;
  http::fields headers = std::move(error.headers);
  std::optional<http::ErrorFacts> facts = std::move(error.error);
  const http::status status = error.status;
  error = http::Response::json(error_message(nullptr, kInvalidRequest, facts->detail), status);
  headers.set(http::field::content_type, error.headers[http::field::content_type]);
  error.headers = std::move(headers);
  error.error = std::move(facts);
}

}  // namespace agentbox::mcp
