#include "api/openai_errors.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace agentbox::api {

namespace {

struct OpenAiKind {
  http::status status;
  const char* type;
  const char* code;
};

// The table of openai_errors.hpp, row by row.
OpenAiKind kind_of(http::status status) {
  using s = http::status;
  switch (status) {
    case s::bad_request:
    case s::unprocessable_entity: return {s::bad_request, "invalid_request_error", "invalid_request"};
    case s::unauthorized: return {status, "invalid_request_error", "invalid_api_key"};
    case s::forbidden: return {status, "permission_error", "permission_denied"};
    case s::not_found: return {status, "invalid_request_error", "not_found"};
    case s::method_not_allowed: return {status, "invalid_request_error", "method_not_allowed"};
    case s::payload_too_large: return {status, "invalid_request_error", "request_too_large"};
    case s::too_many_requests: return {status, "rate_limit_error", "rate_limit_exceeded"};
    default: break;
  }
  if (http::to_status_class(status) == http::status_class::server_error) return {status, "server_error", nullptr};
  return {status, "invalid_request_error", "invalid_request"};
}

// "Service Unavailable" → "service_unavailable".
std::string code_of_reason(http::status status) {
  std::string out(http::obsolete_reason(status));
  for (char& c : out) c = c == ' ' || c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

void shape_openai_error(http::Response& error) {
  if (!error.error) return;
  const OpenAiKind kind = kind_of(error.status);
  std::string code = error.error->code;
  if (code.empty()) code = kind.code ? kind.code : code_of_reason(error.status);
  const std::string detail = error.error->detail;
  http::fields headers = std::move(error.headers);
  std::optional<http::ErrorFacts> facts = std::move(error.error);
  error = http::Response::json(
      {{"error", {{"message", detail}, {"type", kind.type}, {"param", nullptr}, {"code", code}}}}, kind.status);
  headers.set(http::field::content_type, error.headers[http::field::content_type]);
  error.headers = std::move(headers);
  error.error = std::move(facts);
}

}  // namespace agentbox::api
