#include "http/authorize.hpp"

#include <iterator>
#include <string>
#include <variant>

#include "http/error.hpp"

namespace agentbox::http {

namespace {

AuthDecision refuse(http::status status, std::string_view detail) {
  AuthDecision d;
  d.refusal = error_response(status, detail);
  if (status == http::status::unauthorized) d.refusal->headers.set(http::field::www_authenticate, "Bearer");
  return d;
}

AuthDecision pass(AuthDecision::By by) {
  AuthDecision d;
  d.by = by;
  return d;
}

const std::string* query_value(const QueryParams& query, std::string_view name) {
  for (const auto& [k, v] : query)
    if (k == name) return &v;
  return nullptr;
}

// A browser's download link: the token must sign this user and this path; the request then acts
// as that user, whatever user headers it carries.
bool admit_link(Request& request, const SignedLinks* links, std::int64_t now) {
  if (!links) return false;
  const std::string* user = query_value(request.query, "user_id");
  const std::string* path = query_value(request.query, "path");
  const std::string* token = query_value(request.query, "token");
  if (!user || !path || !token || user->empty()) return false;
  if (!links->verify(*user, *path, *token, now)) return false;
  for (const char* header : {"X-User-Id", "X-OpenWebUI-User-Id", "X-Session-Id", "X-OpenWebUI-Chat-Id"})
    request.headers.erase(header);
  request.headers.set("X-User-Id", *user);
  return true;
}

// The shared key, with Open WebUI's signed user when the server checks it.
AuthDecision with_shared_key(const RouteOptions& route, Request& request, const Credentials& credentials,
                             std::int64_t now) {
  const auto tokens = request.headers.equal_range(OpenWebuiJwt::kHeader);
  if (credentials.jwt && tokens.first != tokens.second) {
    if (std::next(tokens.first) != tokens.second)
      return refuse(http::status::unauthorized, "X-OpenWebUI-User-Jwt appears more than once");
    auto verdict = credentials.jwt->verify(tokens.first->value(), now);
    if (auto* refused = std::get_if<OpenWebuiJwt::Refused>(&verdict))
      return refuse(http::status::unauthorized, "Invalid X-OpenWebUI-User-Jwt: " + refused->why);
    if (!bind_user(request, std::get<std::string>(verdict)))
      return refuse(http::status::forbidden, "The user named disagrees with X-OpenWebUI-User-Jwt");
    return pass(AuthDecision::By::api_key);
  }
  if (credentials.require_jwt && !route.is_public)
    return refuse(http::status::unauthorized,
                  "This server requires X-OpenWebUI-User-Jwt with the shared API key ([auth] require_jwt)");
  return pass(AuthDecision::By::api_key);
}

}  // namespace

bool bind_user(Request& request, const std::string& user) {
  for (const char* header : {"X-User-Id", "X-OpenWebUI-User-Id"}) {
    auto range = request.headers.equal_range(header);
    for (auto it = range.first; it != range.second; ++it)
      if (it->value() != user) return false;
  }
  for (const auto& [k, v] : request.query)
    if (k == "user_id" && v != user) return false;
  for (const char* header : {"X-User-Id", "X-OpenWebUI-User-Id"}) request.headers.erase(header);
  request.headers.set("X-User-Id", user);
  return true;
}

AuthDecision authorize(const RouteOptions& route, Request& request, const Credentials& credentials, std::int64_t now) {
  const std::string_view authorization = request.header("Authorization").value_or("");
  const auto token = bearer_token(authorization);
  const std::optional<std::string> key_user = token && credentials.user_keys && UserKeys::looks_like(*token)
                                                  ? credentials.user_keys->user_of(*token)
                                                  : std::nullopt;
  if (route.admin) {
    if (credentials.admin_key.accepts(authorization)) return pass(AuthDecision::By::admin_key);
    // The API key is a valid credential, only not for this route: 403 says so; anything else 401.
    if (credentials.api_key.accepts(authorization) || key_user)
      return refuse(http::status::forbidden, "This is an admin route: it takes the admin key, not the API key");
    return refuse(http::status::unauthorized, "Invalid admin key");
  }
  if (credentials.api_key.accepts(authorization)) return with_shared_key(route, request, credentials, now);
  if (key_user) {
    if (!bind_user(request, *key_user))
      return refuse(http::status::forbidden, "This API key belongs to another user than the one the request names");
    return pass(AuthDecision::By::user_key);
  }
  if (route.signed_link && admit_link(request, credentials.links.get(), now))
    return pass(AuthDecision::By::signed_link);
  if (route.is_public || route.auth_in_handler) return pass(AuthDecision::By::nothing);
  return refuse(http::status::unauthorized, "Invalid API key");
}

}  // namespace agentbox::http
