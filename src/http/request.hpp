#pragma once
// What a handler sees of an HTTP request: no socket, only decoded data. Handlers are plain
// functions of this, so they can be tested by filling the struct by hand.
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/unique_fd.hpp"

namespace agentbox::http {

// Beast's HTTP vocabulary (http::verb, http::status, http::field...) is spelled as part of the
// library's: agentbox::http::status is boost::beast::http::status.
using namespace boost::beast::http;

using QueryParams = std::vector<std::pair<std::string, std::string>>;
using PathParams = std::map<std::string, std::string, std::less<>>;

struct Request {
  http::verb method = http::verb::get;
  std::string target;           // as received: encoded path and query
  std::string path;             // percent-decoded path
  PathParams path_params;       // decoded values of the route's {name} segments
  QueryParams query;            // decoded, in order; values equal to "null" (any case) removed
  http::fields headers;         // case-insensitive lookup
  std::string body;             // the body, unless the route spools it to a file
  UniqueFd body_file;           // RouteOptions::spool_body: an unlinked file holding the body, at offset 0
  std::uint64_t body_size = 0;  // bytes of body, in memory or in body_file
  std::string listener_tag;     // tag of the listener the connection arrived on
  std::string remote_address;   // peer address, for logs
  std::string local_address;    // where the connection arrived, as a URL authority ("10.0.0.5:8000",
                                // "[::1]:8000"): the daemon's own socket, never a header the client sent
  // The NAME of a /{segment}/NAME prefix the router took off the target before routing
  // (Router::scope_prefix: Open WebUI's /p/{profile}); "" when the request came without one.
  std::string scope;

  // The {name} path parameter; throws std::out_of_range when the route has no such parameter.
  const std::string& param(std::string_view name) const;
  // First query value for name, absent when missing or "null".
  std::optional<std::string> query_param(std::string_view name) const;
  // Every value for name (for repeated parameters such as include[]).
  std::vector<std::string> query_params(std::string_view name) const;
  // Header value (name compared case-insensitively), absent when missing.
  std::optional<std::string_view> header(std::string_view name) const;
};

// A request target split and decoded by Boost.URL.
struct ParsedTarget {
  std::string path;                   // decoded
  std::vector<std::string> segments;  // decoded; "/" has none, "/a/" has "a" and ""
  QueryParams query;                  // decoded ('+' is a space), "null" values dropped
};

// Parses an origin-form target ("/path?query"). Absent when it is not one, or when any decoded
// part holds a NUL byte (such a string would be cut short by every C API further down).
std::optional<ParsedTarget> parse_target(std::string_view target);

// RFC 3986 percent-encoding: unreserved characters (and those in `keep`, e.g. "/" for a path)
// stay, every other byte is %XX (upper-case hex).
std::string percent_encode(std::string_view text, std::string_view keep = {});

// The API's rule: a query value that is the literal string "null" in any case is absent.
bool is_null_value(std::string_view value);

}  // namespace agentbox::http
