#pragma once
// One listening socket of the server and its accept loop. A listener is either bound here
// (address:port) or adopted from a socket created elsewhere, for example inside a box's network
// namespace; its tag travels with every request that arrives through it.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "http/server_context.hpp"

namespace agentbox::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class HttpListener : public std::enable_shared_from_this<HttpListener> {
 public:
  // acceptor: open and listening, with a strand as its executor.
  HttpListener(asio::io_context& ioc, tcp::acceptor acceptor, std::shared_ptr<ServerContext> ctx, std::string tag);

  void start();
  // Call on executor() (or when no io thread runs); new connections are refused from then on.
  void close();
  asio::any_io_executor executor() { return acceptor_.get_executor(); }
  std::uint16_t port() const { return port_; }

 private:
  void do_accept();
  void on_accept(boost::system::error_code ec, tcp::socket socket);
  // A place in ctx_->connections and a session, or the limit's answer (429, 503).
  void admit(tcp::socket socket);

  asio::io_context& ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;  // after EMFILE and the like: retry later, don't spin
  std::shared_ptr<ServerContext> ctx_;
  const std::string tag_;
  const std::uint16_t port_;
  // Refused connections still being answered (each holds it: a listener may close first).
  std::shared_ptr<std::atomic<std::size_t>> refusing_ = std::make_shared<std::atomic<std::size_t>>(0);
};

}  // namespace agentbox::http
