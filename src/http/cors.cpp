#include "http/cors.hpp"

#include <algorithm>

#include "http/error.hpp"

namespace agentbox::http {

namespace {
constexpr std::string_view kAllowMethods = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT";
constexpr std::string_view kMaxAgeSeconds = "600";

std::string_view field_value(const http::fields& fields, http::field name) {
  auto it = fields.find(name);
  if (it == fields.end()) return {};
  return {it->value().data(), it->value().size()};
}
}  // namespace

CorsPolicy::CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {
  any_ = std::find(origins_.begin(), origins_.end(), "*") != origins_.end();
}

std::optional<std::string> CorsPolicy::allow_origin(std::string_view origin) const {
  if (origin.empty()) return std::nullopt;
  if (any_) return std::string("*");
  if (std::find(origins_.begin(), origins_.end(), origin) != origins_.end()) return std::string(origin);
  return std::nullopt;
}

bool CorsPolicy::is_preflight(const http::fields& request_headers, http::verb method) {
  return method == http::verb::options && request_headers.find(http::field::origin) != request_headers.end() &&
         request_headers.find(http::field::access_control_request_method) != request_headers.end();
}

Response CorsPolicy::preflight(const http::fields& request_headers) const {
  auto allowed = allow_origin(field_value(request_headers, http::field::origin));
  if (!allowed) return error_response(http::status::bad_request, "Disallowed CORS origin");
  Response r = Response::empty(http::status::no_content);
  r.headers.set(http::field::access_control_allow_origin, *allowed);
  r.headers.set(http::field::access_control_allow_methods, kAllowMethods);
  auto requested = field_value(request_headers, http::field::access_control_request_headers);
  if (!requested.empty()) r.headers.set(http::field::access_control_allow_headers, requested);
  r.headers.set(http::field::access_control_max_age, kMaxAgeSeconds);
  if (!any_) r.headers.set(http::field::vary, "Origin");
  return r;
}

void CorsPolicy::decorate(const http::fields& request_headers, http::fields& response_headers) const {
  auto allowed = allow_origin(field_value(request_headers, http::field::origin));
  if (!allowed) return;
  response_headers.set(http::field::access_control_allow_origin, *allowed);
  if (!any_) response_headers.set(http::field::vary, "Origin");
}

}  // namespace agentbox::http
