#pragma once
// What of a request body and its headers the audit trail may keep (level REQUEST): bodies cut
// at 4 KiB, and the value of every field whose name says it holds a secret (key, secret, token,
// password, authorization, cookie, credential, jwt, ...) replaced by "[REDACTED]": by JSON key
// at any depth when the body parses, by `name: value` / `name=value` scanning when it does not
// (cut, or not JSON), and by header name for the headers.
//
// Runs on: any thread (pure functions); the trail calls them on its writer thread.
#include <boost/beast/http/fields.hpp>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace agentbox::audit {

inline constexpr size_t kBodyLimit = 4096;  // bytes of a body kept
inline constexpr std::string_view kRedacted = "[REDACTED]";

// Whether a field, header or query name names a secret (case-insensitive).
bool is_secret_name(std::string_view name);

// The body as the trail keeps it: redacted, then cut at kBodyLimit bytes (on a UTF-8 boundary).
std::string redact_body(std::string_view body);

// {"name": "value", ...} of the headers, secret ones redacted. Repeated names are joined by ", ".
nlohmann::json redact_headers(const boost::beast::http::fields& headers);

}  // namespace agentbox::audit
