#pragma once
// JSON request bodies. Syntax errors and invalid UTF-8 are the client's fault but not a
// validation failure of a well-formed document, so they are 400 "Invalid JSON body: ...";
// 422 stays for documents of the wrong shape (API.md: "validation errors 422").
#include <nlohmann/json.hpp>

#include "server/request.hpp"

namespace agentbox::server {

// Nesting deeper than this is refused (400) rather than parsed.
inline constexpr int kMaxJsonDepth = 256;

// Parses req.body. Throws HttpError 400 "Invalid JSON body: <reason>" on empty input, syntax
// errors, invalid UTF-8 or nesting deeper than kMaxJsonDepth.
nlohmann::json parse_json_body(const Request& req);

// As parse_json_body, and the top level must be an object: else HttpError 422.
nlohmann::json parse_json_object(const Request& req);

}  // namespace agentbox::server
