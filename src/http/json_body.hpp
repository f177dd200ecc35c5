#pragma once
// JSON request bodies. Syntax errors and invalid UTF-8 are the client's fault but not a
// validation failure of a well-formed document, so they are 400 "Invalid JSON body: ...";
// 422 stays for documents of the wrong shape (API.md: "validation errors 422").
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "http/request.hpp"

namespace agentbox::http {

// Nesting deeper than this is refused (400) rather than parsed.
inline constexpr int kMaxJsonDepth = 256;

// Parses req.body. Throws HttpError 400 "Invalid JSON body: <reason>" on empty input, syntax
// errors, invalid UTF-8, a number out of a double's range (1e309) or nesting deeper than
// kMaxJsonDepth.
nlohmann::json parse_json_body(const Request& req);

// As parse_json_body, and the top level must be an object: else HttpError 422.
nlohmann::json parse_json_object(const Request& req);

// Fields of a parsed body. Missing, null or of another type: HttpError 422 naming the field
// ("Field 'path' is required and must be a string", "Field 'cwd' must be a string").
std::string required_string(const nlohmann::json& body, const char* field);
std::optional<std::string> optional_string(const nlohmann::json& body, const char* field);

}  // namespace agentbox::http
