#include "net/gateway_call.hpp"

#include <sys/socket.h>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <cerrno>
#include <cstring>

#include "net/gateway_session.hpp"

namespace agentbox::net {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

namespace {

// The daemon's end of the socketpair: one request written, one answer read, within the timeout.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(asio::io_context& io, int fd, GatewayCall call, std::function<void(GatewayAnswer)> done)
      : socket_(asio::make_strand(io)), timer_(socket_.get_executor()), call_(std::move(call)), done_(std::move(done)) {
    socket_.assign(asio::local::stream_protocol(), fd);
  }

  void start() {
    request_.method(http::verb::post);
    request_.target(call_.target);
    request_.version(11);
    request_.set(http::field::host, "agentbox-gateway");
    request_.set(http::field::content_type, "application/json");
    request_.set("anthropic-version", "2023-06-01");
    request_.keep_alive(false);
    request_.body() = std::move(call_.body);
    request_.prepare_payload();
    parser_.body_limit(call_.answer_limit);
    timer_.expires_after(call_.timeout);
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec) return;
      self->timed_out_ = true;
      error_code ignored;
      self->socket_.close(ignored);
    });
    http::async_write(socket_, request_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->finish(ec);
      http::async_read(self->socket_, self->buffer_, self->parser_,
                       [self](error_code ec, size_t) { self->finish(ec); });
    });
  }

 private:
  void finish(error_code ec) {
    timer_.cancel();
    error_code ignored;
    socket_.close(ignored);
    GatewayAnswer answer;
    if (timed_out_) {
      answer.error = "the model gateway did not answer in time";
    } else if (ec) {
      answer.error = "the model gateway's answer: " + ec.message();
    } else {
      answer.status = parser_.get().result_int();
      answer.body = std::move(parser_.get().body());
    }
    if (auto done = std::exchange(done_, nullptr)) done(std::move(answer));
  }

  asio::local::stream_protocol::socket socket_;
  asio::steady_timer timer_;
  GatewayCall call_;
  std::function<void(GatewayAnswer)> done_;
  http::request<http::string_body> request_;
  http::response_parser<http::string_body> parser_;
  boost::beast::flat_buffer buffer_;
  bool timed_out_ = false;
};

}  // namespace

void call_gateway(asio::io_context& io, std::shared_ptr<GatewayContext> context, GatewayCall call,
                  std::function<void(GatewayAnswer)> done) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    GatewayAnswer failed;
    failed.error = std::string("socketpair: ") + std::strerror(errno);
    return done(std::move(failed));
  }
  // The gateway's end, as if a box had connected: the session reads and writes it as a
  // stream (TCP options it sets fail quietly on a unix socket).
  asio::ip::tcp::socket gateway_end(asio::make_strand(io));
  gateway_end.assign(asio::ip::tcp::v4(), fds[0]);
  auto who = std::make_shared<BoxAccount>();
  who->account = call.account;
  who->user = call.user;
  auto exchange = std::make_shared<Exchange>(io, fds[1], std::move(call), std::move(done));
  auto strand = gateway_end.get_executor();
  asio::post(strand, [s = std::move(gateway_end), who, context]() mutable {
    std::make_shared<GatewaySession>(std::move(s), who, context)->start();
  });
  exchange->start();
}

}  // namespace agentbox::net
