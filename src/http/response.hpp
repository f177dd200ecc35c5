#pragma once
// What a handler returns: status, extra header fields, body. The session adds framing
// (Content-Length, Connection), CORS and nothing else.
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace agentbox::http {

// Beast's HTTP vocabulary (http::verb, http::status, http::field...) is spelled as part of the
// library's: agentbox::http::status is boost::beast::http::status.
using namespace boost::beast::http;

// What an error answer says, kept beside its {"detail": ...} body (http/error.hpp) so that a
// route table that answers errors in another shape can rebuild the body (Router::shape_errors).
struct ErrorFacts {
  std::string detail;
  std::string code;  // machine-readable, when the thrower named one ("model_not_found"); else ""
};

struct Response {
  http::status status = http::status::ok;
  http::fields headers;  // Content-Type among them
  std::string body;
  std::optional<ErrorFacts> error;  // set by error_response(): this is an error answer

  // JSON body; invalid UTF-8 in strings is replaced (U+FFFD), never a throw.
  static Response json(const nlohmann::json& value, http::status status = http::status::ok);
  static Response text(std::string body, http::status status = http::status::ok,
                       std::string_view content_type = "text/plain; charset=utf-8");
  // No body (204 by default).
  static Response empty(http::status status = http::status::no_content);
};

// Serializes JSON for the wire (compact, invalid UTF-8 replaced).
std::string dump_json(const nlohmann::json& value);

}  // namespace agentbox::http
