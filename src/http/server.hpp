#pragma once
// The HTTP/1.1 server: listeners, N io threads running one io_context, the shared context the
// sessions read (routes, limits, auth, CORS, counters), and the graceful stop.
//
// Runs on: the io threads (util/loop_threads.hpp, named "api"), where the sessions, the
// listeners and the handlers live; listen(), start() and stop() from any other thread.
//
//   Router r; register_routes(r, ...);
//   HttpServer server(std::move(r), options);
//   auto l = server.listen("127.0.0.1", 8000);
//   server.start();
//   ...
//   server.stop();  // stop accepting, let requests finish within the grace period, close the rest
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http/counters.hpp"
#include "http/options.hpp"
#include "http/router.hpp"
#include "util/loop_threads.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::http {

struct ServerContext;
class HttpListener;

struct ListenerInfo {
  unsigned id = 0;         // for close_listener()
  std::uint16_t port = 0;  // the bound port (useful with port 0)
};

class HttpServer {
 public:
  HttpServer(Router router, HttpServerOptions options);
  // Runs on io, which the caller owns and which must outlive the server: what else needs the
  // sessions' threads (a terminal's pty, whose output goes straight to its WebSocket) can be
  // made before the router is. stop() stops io too.
  HttpServer(Router router, HttpServerOptions options, boost::asio::io_context& io);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens on address:port (port 0 picks one). Any time before stop(), any thread.
  // Throws agentbox::Error ("bind(127.0.0.1:80): Permission denied").
  ListenerInfo listen(std::string_view address, std::uint16_t port, std::string tag = {});
  // Serves a TCP socket that is already bound and listening, for example one created inside
  // another network namespace. Takes ownership. Throws agentbox::Error if it is not one.
  ListenerInfo adopt_listener(UniqueFd listening_fd, std::string tag = {});
  // Stops accepting on one listener; its open connections continue.
  void close_listener(unsigned id);

  // Starts the io threads (options.threads, 0 = one per core), named options.thread_name.
  void start();
  // Graceful stop, idempotent; blocks up to shutdown_grace plus a moment. Must not be called
  // from an io thread (a handler): it joins them.
  void stop();

  const HttpCounters& counters() const;
  // The route table being served: CompletedRequest::route_index is a position in its routes().
  const Router& router() const;
  std::size_t connection_count() const;
  // For handlers' own timers (long-poll deadlines): the io_context the sessions run on.
  boost::asio::io_context& io_context() { return ioc_; }

 private:
  ListenerInfo add_listener(boost::asio::ip::tcp::acceptor acceptor, std::string tag);
  void close_on_strand(const std::shared_ptr<HttpListener>& listener);

  std::shared_ptr<ServerContext> ctx_;
  std::unique_ptr<boost::asio::io_context> own_ioc_;  // unless the caller gave one
  boost::asio::io_context& ioc_;
  std::optional<LoopThreads> threads_;  // from start()
  mutable std::mutex mu_;               // guards threads_, listeners_, next_id_, started_, stopped_
  std::map<unsigned, std::shared_ptr<HttpListener>> listeners_;  // after ioc_: destroyed first
  unsigned next_id_ = 1;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace agentbox::http
