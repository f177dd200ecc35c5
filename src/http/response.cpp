#include "http/response.hpp"

namespace agentbox::http {

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Response Response::json(const nlohmann::json& value, http::status status) {
  Response r;
  r.status = status;
  r.headers.set(http::field::content_type, "application/json");
  r.body = dump_json(value);
  return r;
}

Response Response::text(std::string body, http::status status, std::string_view content_type) {
  Response r;
  r.status = status;
  r.headers.set(http::field::content_type, content_type);
  r.body = std::move(body);
  return r;
}

Response Response::empty(http::status status) {
  Response r;
  r.status = status;
  return r;
}

}  // namespace agentbox::http
