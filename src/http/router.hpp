#pragma once
// The route table: (method, path pattern, handler, options). Patterns are literal segments and
// {name} segments (one decoded segment each); a last segment {name:path} takes the rest of the
// path, slashes included. Routes are tried in registration order; the first whose pattern and
// method match wins. A path that some route matches with another method is a 405.
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/verb.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "http/connection_table.hpp"
#include "http/error.hpp"
#include "http/request.hpp"
#include "http/response.hpp"
#include "http/takeover_report.hpp"

namespace agentbox::http {

class ResponseWriter;

// Runs on an io thread and must not block for long: file reads of a few MiB are fine, waits
// are not (use an AsyncHandler).
using Handler = std::function<Response(const Request&)>;
// For long-polls and streams: completes through the writer later, from any thread. The
// Request reference is valid only during the call; copy what is needed afterwards.
using AsyncHandler = std::function<void(const Request&, std::shared_ptr<ResponseWriter>)>;

// A connection that stops being request-response HTTP after this request (a WebSocket upgrade,
// a proxied stream): the handler gets it whole, on its strand, and owns it from then on. The
// body, if the request has one, is not read yet.
struct Takeover {
  using Parser = boost::beast::http::request_parser<boost::beast::http::buffer_body>;
  Request request;                 // head only
  std::unique_ptr<Parser> parser;  // has parsed the head; reads the body (if any) piece by piece
  boost::asio::ip::tcp::socket socket;
  boost::beast::flat_buffer buffer;  // bytes read past the head
  bool key_accepted = false;         // the request's Authorization header held the API key
  ConnectionSlot slot;               // the connection's place in the limits: keep it while it is open
  TakeoverReport report;             // call with the status answered (respond_and_close does)
};
using TakeoverHandler = std::function<void(Takeover)>;

struct RouteOptions {
  bool is_public = false;  // no API key needed (/health, /api/config, /openapi.json)
  // An operator's route: only the admin key is accepted (the API key gets 403, no key 401), and
  // the admin key opens no other route. Exactly the routes under /admin/ (and /metrics, the path scrapers ask for) are
  // admin routes (Router::add checks), so a route's path says who may call it.
  bool admin = false;
  // Takeover routes only: a request without the key still reaches the handler, which
  // authenticates another way (a WebSocket's first message) and sees key_accepted.
  bool auth_in_handler = false;
  // A request without the key passes with a `token` query that signs its `user_id` and `path`
  // queries (http/signed_links.hpp); it then acts as that user only.
  bool signed_link = false;
  std::optional<std::uint64_t> body_limit;  // bytes; overrides HttpServerOptions::body_limit
  bool spool_body = false;                  // body goes to an unlinked temp file (Request::body_file)
};

struct Route {
  http::verb method;
  std::string pattern;
  std::variant<Handler, AsyncHandler, TakeoverHandler> handler;
  RouteOptions options;
  std::vector<std::string> segments;  // pattern split at '/'
};

struct RouteMatch {
  enum class Kind { found, method_not_allowed, not_found } kind = Kind::not_found;
  const Route* route = nullptr;     // when found
  PathParams params;                // when found
  std::vector<http::verb> allowed;  // when method_not_allowed: the methods the path has
};

class Router {
 public:
  // Throws std::invalid_argument on a malformed pattern (a programming error).
  Router& add(http::verb method, std::string pattern, Handler handler, RouteOptions options = {});
  Router& add_async(http::verb method, std::string pattern, AsyncHandler handler, RouteOptions options = {});
  Router& add_takeover(http::verb method, std::string pattern, TakeoverHandler handler, RouteOptions options = {});

  // segments as parse_target() returns them (decoded).
  RouteMatch match(http::verb method, const std::vector<std::string>& segments) const;

  const std::vector<Route>& routes() const { return routes_; }

  // How the exceptions the handlers let escape become responses (http/error.hpp): the
  // library's own map (HttpError, else 500) unless the table's owner sets another (the
  // daemon: the API's, api/errors.hpp).
  Router& map_errors(ErrorMap map) {
    map_ = map;
    return *this;
  }
  ErrorMap error_map() const { return map_; }

  // Error answers to requests under `prefix` ("/v1": /v1 and /v1/...), whoever made them (a
  // handler, the error map, the session's 401/404/405/413), leave in `shape`; elsewhere they
  // stay {"detail": ...}. The session applies it as it sends, the one place every answer passes.
  Router& shape_errors(std::string prefix, ErrorShape shape);
  // The shape for a request's path; null: {"detail": ...}.
  ErrorShape error_shape(std::string_view path) const;

  // Requests whose target starts with /{segment}/NAME/ are routed as the rest of it, NAME kept as
  // Request::scope: one prefix serves every route, not a second copy of each. After a request
  // is authorized, `check` may refuse its scope (an unknown NAME, one not the caller's); it runs
  // on the io thread and must be quick. `authenticated`: a key or a signed user admitted the
  // request (not so on public routes, nor on takeovers that authenticate later). One prefix per router.
  using ScopeCheck = std::function<std::optional<Response>(const Request&, const RouteOptions&, bool authenticated)>;
  Router& scope_prefix(std::string segment, ScopeCheck check);
  // Takes a scope prefix off target ("/p/x/files/list?a" → "/files/list?a") and returns NAME,
  // still encoded as received; "" and target unchanged when it has none.
  std::string take_scope(std::string& target) const;
  // The refusal of req's scope, if any (none without a scope or a check).
  std::optional<Response> check_scope(const Request& req, const RouteOptions& options, bool authenticated) const;

 private:
  Router& add_route(http::verb method, std::string pattern,
                    std::variant<Handler, AsyncHandler, TakeoverHandler> handler, RouteOptions options);
  std::vector<Route> routes_;
  ErrorMap map_ = &response_for_exception;
  std::vector<std::pair<std::string, ErrorShape>> shapes_;
  std::string scope_segment_;  // "" when no prefix is taken
  ScopeCheck scope_check_;
};

// "GET, POST": the Allow header of a 405.
std::string allow_header(const std::vector<http::verb>& methods);

}  // namespace agentbox::http
