#include "http/json_body.hpp"

#include <string>

#include "http/error.hpp"

namespace agentbox::http {

namespace {

[[noreturn]] void invalid(std::string_view reason) {
  throw HttpError(http::status::bad_request, "Invalid JSON body: " + std::string(reason));
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the client needs the rest.
std::string_view without_exception_tag(std::string_view message) {
  if (!message.empty() && message.front() == '[') {
    auto end = message.find("] ");
    if (end != std::string_view::npos) return message.substr(end + 2);
  }
  return message;
}

}  // namespace

nlohmann::json parse_json_body(const Request& req) {
  if (req.body.empty()) invalid("empty body");
  // JSON never holds a raw NUL, and nlohmann's lexer reads one as the end of input, so
  // `{...}\0anything` would parse: refuse it here.
  if (auto nul = req.body.find('\0'); nul != std::string::npos) invalid("NUL byte at offset " + std::to_string(nul));
  bool too_deep = false;
  auto depth_guard = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  try {
    auto value = nlohmann::json::parse(req.body, depth_guard);
    if (too_deep) invalid("nesting deeper than " + std::to_string(kMaxJsonDepth));
    return value;
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number no double holds (1e309): both the client's.
    invalid(without_exception_tag(e.what()));
  }
}

nlohmann::json parse_json_object(const Request& req) {
  auto value = parse_json_body(req);
  if (!value.is_object()) unprocessable("Request body must be a JSON object");
  return value;
}

std::string required_string(const nlohmann::json& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || !it->is_string())
    unprocessable(std::string("Field '") + field + "' is required and must be a string");
  return it->get<std::string>();
}

std::optional<std::string> optional_string(const nlohmann::json& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) unprocessable(std::string("Field '") + field + "' must be a string");
  return it->get<std::string>();
}

}  // namespace agentbox::http
