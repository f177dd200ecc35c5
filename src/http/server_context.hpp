#pragma once
// What the server, its listeners and its sessions share: the route table, the options, the
// auth and CORS policies, the counters and the session registry. Sessions hold it by
// shared_ptr, so it outlives the last of them.
#include <atomic>

#include "http/authorize.hpp"
#include "http/connection_table.hpp"
#include "http/cors.hpp"
#include "http/counters.hpp"
#include "http/options.hpp"
#include "http/router.hpp"
#include "http/session_registry.hpp"

namespace agentbox::http {

struct ServerContext {
  // Declaration order matters: credentials and cors read o before it is moved into options.
  ServerContext(Router r, HttpServerOptions o)
      : router(std::move(r)),
        credentials{ApiKeyAuth(o.api_key), ApiKeyAuth(o.admin_key), o.links, o.user_keys, jwt_of(o), o.require_jwt},
        cors(o.cors_origins),
        connections(ConnectionTable::create({o.max_connections, o.max_connections_per_address})),
        options(without_key(std::move(o))) {}

  const Router router;
  const Credentials credentials;  // the keys' digests only, and the signed links' checker
  const CorsPolicy cors;
  // Every open connection's place, sessions and takeovers alike; their slots keep it alive.
  const std::shared_ptr<ConnectionTable> connections;
  const HttpServerOptions options;  // api_key, admin_key and openwebui_jwt_secret emptied
  HttpCounters counters;
  std::atomic<bool> stopping{false};  // set once by HttpServer::stop()
  SessionRegistry sessions;

 private:
  static HttpServerOptions without_key(HttpServerOptions o) {
    o.api_key.clear();
    o.admin_key.clear();
    o.openwebui_jwt_secret.clear();
    return o;
  }
  static std::shared_ptr<const OpenWebuiJwt> jwt_of(const HttpServerOptions& o) {
    if (o.openwebui_jwt_secret.empty()) return nullptr;
    return std::make_shared<const OpenWebuiJwt>(o.openwebui_jwt_secret);
  }
};

}  // namespace agentbox::http
