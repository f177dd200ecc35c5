#pragma once
// CORS: which origins may call the API from a browser, the preflight answer, and the
// Access-Control-Allow-Origin header on ordinary responses.
#include <boost/beast/http/fields.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/response.hpp"

namespace agentbox::http {

class CorsPolicy {
 public:
  // "*" in origins allows any origin.
  explicit CorsPolicy(std::vector<std::string> origins);

  // The Access-Control-Allow-Origin value for a request from origin, absent when not allowed.
  std::optional<std::string> allow_origin(std::string_view origin) const;

  // A preflight is an OPTIONS request carrying Origin and Access-Control-Request-Method.
  static bool is_preflight(const http::fields& request_headers, http::verb method);

  // 204 with the allow headers, or 400 {"detail":"Disallowed CORS origin"} as Starlette does.
  Response preflight(const http::fields& request_headers) const;

  // Adds Access-Control-Allow-Origin (and Vary: Origin) to a response when the request's
  // Origin is allowed.
  void decorate(const http::fields& request_headers, http::fields& response_headers) const;

 private:
  bool any_ = false;
  std::vector<std::string> origins_;
};

}  // namespace agentbox::http
