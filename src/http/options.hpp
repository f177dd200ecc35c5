#pragma once
// Limits and timeouts of the HTTP layer. Every field has a default, so HttpServerOptions{} serves.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox::http {

struct Request;

class SignedLinks;
class UserKeys;

// One answered request, as the access log sees it: for a metrics observer and the audit trail.
struct CompletedRequest {
  static constexpr size_t kNoRoute = static_cast<size_t>(-1);
  // The credential authorize() found valid (AuthDecision::By: nothing, api_key, admin_key,
  // signed_link, user_key); and whether it refused the request (401, 403) for it.
  enum class Credential : std::uint8_t { nothing, api_key, admin_key, signed_link, user_key };
  size_t route_index = kNoRoute;  // the route's position in the router's table; kNoRoute: none matched
  std::string_view method;        // the request's method as sent ("-" when never read)
  unsigned status = 0;
  std::chrono::steady_clock::duration duration{};  // head read to last byte sent
  Credential credential = Credential::nothing;
  bool refused_credential = false;
  const Request* request = nullptr;  // headers (user ones bound by authorize), body, remote address
  bool key_in_frame = false;         // a key came other than in Authorization (a WebSocket's auth frame)
};

struct HttpServerOptions {
  unsigned threads = 0;                              // io threads; 0 = one per core
  std::string thread_name = "api";                   // what ps -L calls them
  std::uint64_t body_limit = 100ull * 1024 * 1024;   // bytes; RouteOptions::body_limit overrides
  std::uint32_t header_limit = 64 * 1024;            // bytes of request line + header fields
  std::chrono::milliseconds header_timeout{10'000};  // first byte → end of headers (new connection: accept → end)
  std::chrono::milliseconds idle_timeout{30'000};    // keep-alive: wait for the next request's first byte
  std::chrono::milliseconds body_timeout{30'000};    // longest silence while reading a body
  std::chrono::milliseconds write_timeout{30'000};   // longest single write (client not reading)
  std::chrono::milliseconds linger_timeout{2'000};   // draining unread input after an error, before close
  std::chrono::milliseconds shutdown_grace{10'000};  // stop(): in-flight requests may finish within this
  std::size_t max_connections = 10'000;              // open at once, takeovers included; then the
                                                     // oldest idle one makes room, or 503 (connection_table.hpp)
  std::size_t max_connections_per_address = 8'192;   // the same per client address (IPv6: /64), or 429
  std::size_t stream_queue_limit = 8 * 1024 * 1024;  // bytes queued by a streaming handler before the
                                                     // connection is dropped as too slow
  std::string api_key;                               // Bearer key; empty = every non-public route is 401
  std::string admin_key;                             // Bearer key of RouteOptions::admin routes (and only
                                                     // of those); empty = every admin route is 401
  std::vector<std::string> cors_origins{"*"};        // allowed Origin values; "*" = any
  std::string spool_dir = "/var/tmp";                // O_TMPFILE home for RouteOptions::spool_body
  // When set, the spool directory of this request (its head is complete): the daemon spools
  // each account's uploads in its own volume, charged to its quota. May throw HttpError.
  std::function<std::string(const Request&)> spool_dir_for;
  std::string node_name;                      // a cluster node's name: X-Agentbox-Node on every
                                              // answer (which node nginx chose); empty: none
  std::shared_ptr<const SignedLinks> links;   // checks RouteOptions::signed_link tokens; none: refused
  std::shared_ptr<const UserKeys> user_keys;  // per-user keys (http/user_keys.hpp); none: no such key
  std::string openwebui_jwt_secret;           // X-OpenWebUI-User-Jwt's HS256 secret; empty: the header is ignored
  bool require_jwt = false;                   // the shared key is refused without a valid X-OpenWebUI-User-Jwt
  // Called once per answered request, where the access log is written (an io thread); for a
  // takeover route, where its handler answers (http/takeover_report.hpp: an io strand or the
  // terminals' loop). Must not block. Empty: nothing observes.
  std::function<void(const CompletedRequest&)> on_request;
};

}  // namespace agentbox::http
