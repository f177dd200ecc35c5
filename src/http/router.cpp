#include "http/router.hpp"

#include <algorithm>
#include <stdexcept>

namespace agentbox::http {

namespace {

bool is_param(std::string_view segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

// "{name}" → "name", "{name:path}" → "name".
std::string_view param_name(std::string_view segment) {
  auto inner = segment.substr(1, segment.size() - 2);
  return inner.substr(0, inner.find(':'));
}

bool is_tail_param(std::string_view segment) {
  return is_param(segment) && segment.substr(1, segment.size() - 2).ends_with(":path");
}

// "/" → {}, "/a/{b}" → {"a", "{b}"}, "/a/" → {"a", ""}: the same split Boost.URL gives a path.
std::vector<std::string> split_pattern(const std::string& pattern) {
  if (pattern.empty() || pattern.front() != '/')
    throw std::invalid_argument("route pattern must start with '/': " + pattern);
  std::vector<std::string> out;
  if (pattern == "/") return out;
  size_t start = 1;
  while (true) {
    size_t slash = pattern.find('/', start);
    out.push_back(pattern.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& s = out[i];
    bool braces = s.find_first_of("{}") != std::string::npos;
    if (braces && (!is_param(s) || param_name(s).empty()))
      throw std::invalid_argument("route pattern segment must be a whole {name}: " + pattern);
    if (is_param(s) && s.find(':') != std::string::npos && (!is_tail_param(s) || i + 1 != out.size()))
      throw std::invalid_argument("{name:path} must be the last segment: " + pattern);
  }
  return out;
}

// Fills params when segments fit the pattern.
bool matches(const Route& route, const std::vector<std::string>& segments, PathParams& params) {
  const auto& pattern = route.segments;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (is_tail_param(pattern[i])) {
      if (i >= segments.size()) return false;
      std::string rest = segments[i];
      for (size_t j = i + 1; j < segments.size(); ++j) rest += "/" + segments[j];
      params.emplace(std::string(param_name(pattern[i])), std::move(rest));
      return true;
    }
    if (i >= segments.size()) return false;
    if (is_param(pattern[i])) {
      if (segments[i].empty()) return false;
      params.emplace(std::string(param_name(pattern[i])), segments[i]);
    } else if (pattern[i] != segments[i]) {
      return false;
    }
  }
  return pattern.size() == segments.size();
}

}  // namespace

Router& Router::add(http::verb method, std::string pattern, Handler handler, RouteOptions options) {
  return add_route(method, std::move(pattern), std::move(handler), options);
}

Router& Router::add_async(http::verb method, std::string pattern, AsyncHandler handler, RouteOptions options) {
  return add_route(method, std::move(pattern), std::move(handler), options);
}

Router& Router::add_takeover(http::verb method, std::string pattern, TakeoverHandler handler, RouteOptions options) {
  return add_route(method, std::move(pattern), std::move(handler), options);
}

Router& Router::add_route(http::verb method, std::string pattern,
                          std::variant<Handler, AsyncHandler, TakeoverHandler> handler, RouteOptions options) {
  if (options.auth_in_handler && !std::holds_alternative<TakeoverHandler>(handler))
    throw std::invalid_argument("auth_in_handler is for takeover routes: " + pattern);
  // /metrics, the path every Prometheus scraper asks for, may be either: the admin key's on the
  // API, keyless on the metrics listener (a router of its own).
  if (pattern != "/metrics" && options.admin != pattern.starts_with("/admin/"))
    throw std::invalid_argument("routes under /admin/ (and /metrics), and only those, are admin routes: " + pattern);
  if (options.admin && (options.is_public || options.auth_in_handler || options.signed_link))
    throw std::invalid_argument("an admin route takes the admin key only: " + pattern);
  auto segments = split_pattern(pattern);
  routes_.push_back(Route{method, std::move(pattern), std::move(handler), options, std::move(segments)});
  return *this;
}

RouteMatch Router::match(http::verb method, const std::vector<std::string>& segments) const {
  RouteMatch result;
  for (const auto& route : routes_) {
    PathParams params;
    if (!matches(route, segments, params)) continue;
    if (route.method == method) {
      result.kind = RouteMatch::Kind::found;
      result.route = &route;
      result.params = std::move(params);
      return result;
    }
    if (std::find(result.allowed.begin(), result.allowed.end(), route.method) == result.allowed.end())
      result.allowed.push_back(route.method);
  }
  result.kind = result.allowed.empty() ? RouteMatch::Kind::not_found : RouteMatch::Kind::method_not_allowed;
  return result;
}

Router& Router::shape_errors(std::string prefix, ErrorShape shape) {
  if (prefix.size() < 2 || prefix.front() != '/' || prefix.back() == '/')
    throw std::invalid_argument("an error shape's prefix is a path without a trailing slash: " + prefix);
  shapes_.emplace_back(std::move(prefix), shape);
  return *this;
}

ErrorShape Router::error_shape(std::string_view path) const {
  for (const auto& [prefix, shape] : shapes_)
    if (path.starts_with(prefix) && (path.size() == prefix.size() || path[prefix.size()] == '/')) return shape;
  return nullptr;
}

Router& Router::scope_prefix(std::string segment, ScopeCheck check) {
  if (segment.empty() || segment.find('/') != std::string::npos)
    throw std::invalid_argument("a scope prefix is one path segment: " + segment);
  scope_segment_ = std::move(segment);
  scope_check_ = std::move(check);
  return *this;
}

std::string Router::take_scope(std::string& target) const {
  if (scope_segment_.empty()) return {};
  const std::string_view t = target;
  const size_t name_at = scope_segment_.size() + 2;  // past "/{segment}/"
  if (t.size() <= name_at || t[0] != '/' || t.substr(1, scope_segment_.size()) != scope_segment_ ||
      t[name_at - 1] != '/')
    return {};
  const size_t end = t.find_first_of("/?#", name_at);
  std::string name(t.substr(name_at, end == std::string_view::npos ? std::string_view::npos : end - name_at));
  if (name.empty()) return {};
  // The rest is a path of its own: "/p/x" and "/p/x?q" are "/" and "/?q".
  std::string rest = end == std::string_view::npos ? "" : std::string(t.substr(end));
  target = rest.empty() || rest.front() != '/' ? "/" + rest : std::move(rest);
  return name;
}

std::optional<Response> Router::check_scope(const Request& req, const RouteOptions& options, bool authenticated) const {
  if (req.scope.empty() || !scope_check_) return std::nullopt;
  return scope_check_(req, options, authenticated);
}

std::string allow_header(const std::vector<http::verb>& methods) {
  std::string out;
  for (auto m : methods) {
    if (!out.empty()) out += ", ";
    out += http::to_string(m);
  }
  return out;
}

}  // namespace agentbox::http
