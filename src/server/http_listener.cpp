#include "server/http_listener.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "server/access_log.hpp"
#include "server/http_session.hpp"

namespace agentbox::server {

namespace {
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
}

HttpListener::HttpListener(net::io_context& ioc, tcp::acceptor acceptor, std::shared_ptr<ServerContext> ctx,
                           std::string tag)
    : ioc_(ioc),
      acceptor_(std::move(acceptor)),
      retry_timer_(acceptor_.get_executor()),
      ctx_(std::move(ctx)),
      tag_(std::move(tag)),
      port_(acceptor_.local_endpoint().port()) {}

void HttpListener::start() {
  net::post(acceptor_.get_executor(), [self = shared_from_this()] { self->do_accept(); });
}

void HttpListener::close() {
  boost::system::error_code ignored;
  retry_timer_.cancel();
  acceptor_.close(ignored);
}

void HttpListener::do_accept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(net::make_strand(ioc_), [self = shared_from_this()](auto ec, tcp::socket socket) {
    self->on_accept(ec, std::move(socket));
  });
}

void HttpListener::on_accept(boost::system::error_code ec, tcp::socket socket) {
  if (!acceptor_.is_open() || ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors or memory: the backlog waits while we pause instead of spinning.
    http_logger()->warn("accept on port {}: {}", port_, ec.message());
    retry_timer_.expires_after(kAcceptRetryDelay);
    retry_timer_.async_wait([self = shared_from_this()](auto wait_ec) {
      if (!wait_ec) self->do_accept();
    });
    return;
  }
  if (ctx_->stopping.load() || ctx_->sessions.size() >= ctx_->options.max_connections) {
    if (!ctx_->stopping.load()) count(ctx_->counters.connections_rejected);
    boost::system::error_code ignored;
    socket.close(ignored);
  } else {
    count(ctx_->counters.connections_accepted);
    std::make_shared<HttpSession>(std::move(socket), ctx_, tag_)->start();
  }
  do_accept();
}

}  // namespace agentbox::server
