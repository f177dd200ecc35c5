#include "net/gateway_routes.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace agentbox::net {

namespace {

constexpr size_t kShownTarget = 200;  // of a refused target, in the reason

bool plain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

bool plain(std::string_view s) { return std::all_of(s.begin(), s.end(), plain_char); }

bool is_dot_segment(std::string_view segment) { return segment == "." || segment == ".."; }

// Calls f(segment) for each "/"-separated segment of path after the leading "/".
template <class F>
void for_each_segment(std::string_view path, F&& f) {
  path.remove_prefix(1);
  for (;;) {
    size_t slash = path.find('/');
    f(path.substr(0, slash));
    if (slash == std::string_view::npos) return;
    path.remove_prefix(slash + 1);
  }
}

// Empty when every name=value of query is one the route lists with a plain value.
std::string query_refusal(const GatewayRoute& route, std::string_view query) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    size_t eq = pair.find('=');
    std::string_view name = pair.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (name.empty() && value.empty()) continue;  // "a&&b", a trailing "&"
    bool listed = !name.empty() && std::find(route.query.begin(), route.query.end(), name) != route.query.end();
    if (!listed || !plain(value))
      return fmt::format("agentbox: the model gateway takes no query parameter {:?} on {} {}",
                         std::string(pair.substr(0, kShownTarget)), route.method, route.path);
  }
  return {};
}

std::string routes_list() {
  std::string out;
  for (const GatewayRoute& r : kGatewayRoutes) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", r.method, r.path);
  return out;
}

}  // namespace

RouteMatch match_gateway_route(std::string_view method, std::string_view target) {
  RouteMatch m;
  const std::string shown(target.substr(0, kShownTarget));
  size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  if (!path.starts_with('/')) {
    m.refusal = "agentbox: the model gateway takes only a path such as /v1/messages";
    return m;
  }
  for (char c : path) {
    if (c != '/' && !plain_char(c)) {
      m.refusal = fmt::format(
          "agentbox: the model gateway refuses {:?}: a path holds only letters, digits, '-', '.', '_', '~' and '/' "
          "(no percent-encoding)",
          shown);
      return m;
    }
  }
  bool dots = false, empty = false;
  for_each_segment(path, [&](std::string_view segment) {
    dots = dots || is_dot_segment(segment);
    empty = empty || segment.empty();
  });
  if (dots || empty) {
    m.refusal = fmt::format("agentbox: the model gateway refuses {:?}: a path may not hold {} segment", shown,
                            dots ? "a '.' or '..'" : "an empty");
    return m;
  }
  for (const GatewayRoute& route : kGatewayRoutes) {
    if (route.method != method || route.path != path) continue;
    m.refusal = query_refusal(route, query);
    if (m.refusal.empty()) m.route = &route;
    return m;
  }
  m.refusal = fmt::format("agentbox: the model gateway forwards only the model API ({}), not {} {:?}", routes_list(),
                          std::string(method.substr(0, 32)), std::string(path.substr(0, kShownTarget)));
  return m;
}

}  // namespace agentbox::net
