// What the inference gateway reads of a box's request before the operator's credential goes
// with it: the method and target (net/gateway_routes.*), and, for a budget, the body's worst
// case (net/request_worst_case.*). The input's first byte picks a method, the bytes up to the
// first newline are the target, the rest is the body.
//
// Checks: a target that matches a route is plain (letters, digits, "-._~/" in the path, no
// empty, "." or ".." segment), its path and method are the route's; a refusal is one
// "agentbox: " line of bounded size. The body is read exactly as nlohmann's full parser reads
// it: a body the scan takes is a JSON object whose top-level max_tokens is the whole number
// the scan found, named once; a JSON object with one such max_tokens, nested less than
// kMaxDepth deep, is taken; the input bound is the body's size plus the allowance, or the
// context window.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "net/gateway_routes.hpp"
#include "net/request_worst_case.hpp"

namespace {

using agentbox::net::GatewayRoute;
using json = nlohmann::json;

constexpr std::string_view kMethods[] = {"POST", "GET", "DELETE", "PUT", "HEAD", "post"};
constexpr uint64_t kContext = 123'456;

bool plain_path_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~' || c == '/';
}

void check_route(std::string_view method, std::string_view target) {
  agentbox::net::RouteMatch m = agentbox::net::match_gateway_route(method, target);
  if (!m.route) {
    FUZZ_CHECK(m.refusal.starts_with("agentbox: "));
    FUZZ_CHECK(m.refusal.find('\n') == std::string::npos && m.refusal.size() < 1024);
    return;
  }
  FUZZ_CHECK(m.refusal.empty());
  FUZZ_CHECK(m.route->method == method);
  std::string_view path = target.substr(0, target.find('?'));
  FUZZ_CHECK(path.starts_with('/'));
  for (char c : path) FUZZ_CHECK(plain_path_char(c));
  FUZZ_CHECK(path.find("//") == std::string_view::npos && !path.ends_with('/'));
  FUZZ_CHECK(path.find("/./") == std::string_view::npos && path.find("/../") == std::string_view::npos);
  FUZZ_CHECK(!path.ends_with("/.") && !path.ends_with("/.."));
  FUZZ_CHECK(path == m.route->path);
}

size_t depth_of(const json& j) {
  size_t deepest = 0;
  if (j.is_structured())
    for (const json& child : j) deepest = std::max(deepest, depth_of(child));
  return j.is_structured() ? deepest + 1 : 0;
}

// How many top-level keys read as max_tokens (a key may be escaped differently each time).
size_t max_tokens_keys(std::string_view body) {
  size_t n = 0;
  json::parser_callback_t count = [&](int d, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && d == 1 && parsed == "max_tokens") ++n;
    return true;
  };
  (void)json::parse(body, count, /*allow_exceptions=*/false);
  return n;
}

void check_body(std::string_view body) {
  agentbox::net::WorstCaseScan scan = agentbox::net::worst_case_tokens(body, kContext);
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (scan.worst) {
    FUZZ_CHECK(scan.refusal.empty());
    FUZZ_CHECK(doc.is_object());
    FUZZ_CHECK(max_tokens_keys(body) == 1);
    const json& max = doc["max_tokens"];
    FUZZ_CHECK(max.is_number_unsigned() && max.get<uint64_t>() == scan.worst->output);
    if (scan.worst->input_bound == "the body's size")
      FUZZ_CHECK(scan.worst->input == body.size() + agentbox::net::kPromptAllowance);
    else
      FUZZ_CHECK(scan.worst->input == kContext);
    FUZZ_CHECK(depth_of(doc) <= agentbox::net::kMaxDepth);
    return;
  }
  FUZZ_CHECK(scan.refusal.starts_with("agentbox: "));
  if (doc.is_object() && depth_of(doc) < agentbox::net::kMaxDepth) {
    auto it = doc.find("max_tokens");
    if (it != doc.end() && it->is_number_unsigned()) FUZZ_CHECK(max_tokens_keys(body) > 1);  // named twice
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view method = kMethods[data[0] % std::size(kMethods)];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t newline = rest.find('\n');
  check_route(method, rest.substr(0, newline));
  if (newline != std::string_view::npos) check_body(rest.substr(newline + 1));
  return 0;
}
