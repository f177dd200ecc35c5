#pragma once
// Who may make a request, decided in one place from the route's options and the request alone
// (no socket, no server: tests call it directly). The session asks once the head is read,
// before any of the body:
//
//   route            admin key   API key        a user's key       a valid signed link   nothing valid
//   admin            pass        403            403                401 (a)               401 (a)
//   ordinary         401         pass           pass, as its user  401                   401 (b)
//   signed_link      401         pass           pass, as its user  pass, as its user     401 (b)
//   is_public        pass        pass (by key)  pass, as its user  pass                  pass
//   auth_in_handler  pass        pass (by key)  pass, as its user  pass                  pass (the handler checks)
//
//   (a) "Invalid admin key"   (b) "Invalid API key"
//
// (The admin key is no API key: on any other route it counts as nothing.) A signed link
// rewrites the request: its user replaces whatever user the headers named. So does a user's
// key (http/user_keys.hpp), but a request naming another user than the key's (X-User-Id,
// X-OpenWebUI-User-Id or ?user_id=) is 403; a revoked or unknown user key is nothing valid.
//
// The shared API key with Credentials::jwt set: a request carrying X-OpenWebUI-User-Jwt acts
// as the token's user (http/openwebui_jwt.hpp); a token that fails a check is 401, and a user
// header naming someone else is 403. With require_jwt, the shared key without a valid token
// is 401 on every route but the public ones: the key alone names no one.
#include <cstdint>
#include <memory>
#include <optional>

#include "http/api_key_auth.hpp"
#include "http/openwebui_jwt.hpp"
#include "http/request.hpp"
#include "http/response.hpp"
#include "http/router.hpp"
#include "http/signed_links.hpp"
#include "http/user_keys.hpp"

namespace agentbox::http {

// What requests are checked against: the server holds one (server_context.hpp).
struct Credentials {
  ApiKeyAuth api_key;                         // ordinary routes (a digest only)
  ApiKeyAuth admin_key;                       // RouteOptions::admin routes, and only those
  std::shared_ptr<const SignedLinks> links;   // RouteOptions::signed_link tokens; none: refused
  std::shared_ptr<const UserKeys> user_keys;  // per-user keys; none: no such key is valid
  std::shared_ptr<const OpenWebuiJwt> jwt;    // [auth] openwebui_jwt_secret; none: the header is ignored
  bool require_jwt = false;                   // [auth] require_jwt: the shared key alone is refused
};

struct AuthDecision {
  enum class By { nothing, api_key, admin_key, signed_link, user_key };
  By by = By::nothing;              // the credential the request holds, if any was valid here
  std::optional<Response> refusal;  // 401 or 403: the request goes no further

  bool allowed() const { return !refusal; }
  // Takeover::key_accepted: the Authorization header held the key of this route (a user's
  // key included: the request then names its user).
  bool key_accepted() const { return by == By::api_key || by == By::admin_key || by == By::user_key; }
  // The connection's client proved who it is (connection_table.hpp: such connections are the
  // last to make room for new ones).
  bool authenticated() const { return by != By::nothing; }
};

// now: unix seconds, against which a signed link's expiry is checked. When a signed link is
// what admits the request, its user-naming headers (X-User-Id, X-OpenWebUI-User-Id,
// X-Session-Id, X-OpenWebUI-Chat-Id) are replaced by X-User-Id: the link's user.
// Whether the request names no user but `user` (X-User-Id, X-OpenWebUI-User-Id, ?user_id=);
// if so, its user headers are replaced by X-User-Id: user. A request naming another is left as
// it is and false returned (the caller answers 403).
bool bind_user(Request& request, const std::string& user);

AuthDecision authorize(const RouteOptions& route, Request& request, const Credentials& credentials, std::int64_t now);

}  // namespace agentbox::http
