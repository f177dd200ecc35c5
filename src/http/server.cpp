#include "http/server.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <future>

#include "http/listener.hpp"
#include "http/server_context.hpp"
#include "http/session.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace agentbox::http {

namespace {

// After the grace period and the forced close, how long closing sockets may take.
constexpr std::chrono::seconds kForcedCloseWait{2};

unsigned thread_count(unsigned requested) {
  if (requested > 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

int socket_option(int fd, int level, int name, const std::string& op) {
  int value = 0;
  socklen_t len = sizeof value;
  check(::getsockopt(fd, level, name, &value, &len), op);
  return value;
}

}  // namespace

HttpServer::HttpServer(Router router, HttpServerOptions options)
    : ctx_(std::make_shared<ServerContext>(std::move(router), std::move(options))),
      own_ioc_(std::make_unique<asio::io_context>(static_cast<int>(thread_count(ctx_->options.threads)))),
      ioc_(*own_ioc_) {}

HttpServer::HttpServer(Router router, HttpServerOptions options, asio::io_context& io)
    : ctx_(std::make_shared<ServerContext>(std::move(router), std::move(options))), ioc_(io) {}

HttpServer::~HttpServer() { stop(); }

ListenerInfo HttpServer::listen(std::string_view address, std::uint16_t port, std::string tag) {
  const std::string where = std::string(address) + ":" + std::to_string(port);
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(address, ec);
  if (ec) throw Error("listen(" + where + "): invalid address");
  tcp::endpoint endpoint(ip, port);
  tcp::acceptor acceptor(asio::make_strand(ioc_));
  auto fail_if = [&](const char* op) {
    if (ec) throw Error(std::string(op) + "(" + where + "): " + ec.message(), ec.value());
  };
  acceptor.open(endpoint.protocol(), ec);
  fail_if("socket");
  acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  fail_if("setsockopt(SO_REUSEADDR)");
  acceptor.bind(endpoint, ec);
  fail_if("bind");
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  fail_if("listen");
  return add_listener(std::move(acceptor), std::move(tag));
}

ListenerInfo HttpServer::adopt_listener(UniqueFd fd, std::string tag) {
  const std::string what = "adopt_listener(fd " + std::to_string(fd.get()) + ")";
  if (socket_option(fd.get(), SOL_SOCKET, SO_TYPE, "getsockopt(SO_TYPE) " + what) != SOCK_STREAM ||
      !socket_option(fd.get(), SOL_SOCKET, SO_ACCEPTCONN, "getsockopt(SO_ACCEPTCONN) " + what))
    throw Error(what + ": not a listening stream socket");
  const int family = socket_option(fd.get(), SOL_SOCKET, SO_DOMAIN, "getsockopt(SO_DOMAIN) " + what);
  if (family != AF_INET && family != AF_INET6) throw Error(what + ": not a TCP socket");
  tcp::acceptor acceptor(asio::make_strand(ioc_));
  boost::system::error_code ec;
  acceptor.assign(family == AF_INET ? tcp::v4() : tcp::v6(), fd.get(), ec);
  if (ec) throw Error(what + ": " + ec.message(), ec.value());
  fd.release();  // the acceptor owns it now
  return add_listener(std::move(acceptor), std::move(tag));
}

ListenerInfo HttpServer::add_listener(tcp::acceptor acceptor, std::string tag) {
  auto listener = std::make_shared<HttpListener>(ioc_, std::move(acceptor), ctx_, std::move(tag));
  ListenerInfo info;
  {
    std::lock_guard lock(mu_);
    if (stopped_) throw Error("listen: server is stopped");
    info = {next_id_++, listener->port()};
    listeners_.emplace(info.id, listener);
  }
  listener->start();
  return info;
}

void HttpServer::close_listener(unsigned id) {
  std::shared_ptr<HttpListener> listener;
  {
    std::lock_guard lock(mu_);
    auto it = listeners_.find(id);
    if (it == listeners_.end()) return;
    listener = std::move(it->second);
    listeners_.erase(it);
  }
  close_on_strand(listener);
}

void HttpServer::close_on_strand(const std::shared_ptr<HttpListener>& listener) {
  bool running;
  {
    std::lock_guard lock(mu_);
    running = threads_ && threads_->size() > 0;
  }
  if (!running) return listener->close();  // no io thread can touch it concurrently
  // The acceptor belongs to its strand; wait until the close ran there, so the port refuses
  // connections when this returns.
  std::promise<void> closed;
  auto done = closed.get_future();
  asio::post(listener->executor(), [listener, &closed] {
    listener->close();
    closed.set_value();
  });
  done.wait();
}

void HttpServer::start() {
  std::lock_guard lock(mu_);
  if (started_ || stopped_) return;
  started_ = true;
  threads_.emplace(ioc_, thread_count(ctx_->options.threads), ctx_->options.thread_name);
}

void HttpServer::stop() {
  std::map<unsigned, std::shared_ptr<HttpListener>> listeners;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    if (threads_ && threads_->on_loop_thread()) throw std::logic_error("HttpServer::stop() called from an io thread");
    stopped_ = true;
    listeners.swap(listeners_);
  }
  ctx_->stopping.store(true);
  for (const auto& [id, listener] : listeners) close_on_strand(listener);
  listeners.clear();

  const auto deadline = std::chrono::steady_clock::now() + ctx_->options.shutdown_grace;
  for (const auto& session : ctx_->sessions.snapshot()) session->begin_shutdown();
  if (!ctx_->sessions.wait_empty_until(deadline)) {
    const auto left = ctx_->sessions.size();
    log::warn("http", "shutdown: {} connection(s) still busy after the grace period, closing them", left);
    for (const auto& session : ctx_->sessions.snapshot()) session->force_close();
    if (!ctx_->sessions.wait_empty_until(std::chrono::steady_clock::now() + kForcedCloseWait))
      log::warn("http", "shutdown: {} connection(s) held by handlers after close", ctx_->sessions.size());
  }
  if (threads_) {
    threads_->stop();  // stops ioc_ too
  } else {
    ioc_.stop();
  }
}

const HttpCounters& HttpServer::counters() const { return ctx_->counters; }
const Router& HttpServer::router() const { return ctx_->router; }

std::size_t HttpServer::connection_count() const { return ctx_->sessions.size(); }

}  // namespace agentbox::http
