#include "http/listener.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <array>

#include "http/error.hpp"
#include "http/session.hpp"
#include "util/log.hpp"

namespace agentbox::http {

namespace {

namespace beast = boost::beast;

constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// A refused connection gets its answer, then its input is drained this long so that closing
// does not reset the answer away. At most kMaxRefusing at once: past them a refusal is a close.
constexpr std::chrono::seconds kRefusalDeadline{2};
constexpr std::size_t kMaxRefusing = 64;

// The answer to a connection the limits turn away (429: its address's, 503: the daemon's), sent
// at once (a server may answer before the request), then the connection closes.
class Refusal : public std::enable_shared_from_this<Refusal> {
 public:
  Refusal(tcp::socket socket, http::status status, const std::string& detail,
          std::shared_ptr<std::atomic<std::size_t>> in_flight)
      : stream_(std::move(socket)), message_(status, 11), in_flight_(std::move(in_flight)) {
    Response r = error_response(status, detail);
    for (const auto& field : r.headers) message_.insert(field.name_string(), field.value());
    message_.set(http::field::retry_after, "1");
    message_.keep_alive(false);
    message_.body() = std::move(r.body);
    message_.prepare_payload();
  }
  ~Refusal() { in_flight_->fetch_sub(1, std::memory_order_relaxed); }

  void run() {
    stream_.expires_after(kRefusalDeadline);
    http::async_write(stream_, message_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      self->drain();
    });
  }

 private:
  void drain() {
    stream_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (!ec) self->drain();  // until the client's end of file, or the deadline
    });
  }

  beast::tcp_stream stream_;
  http::response<http::string_body> message_;
  std::array<char, 4096> scratch_;
  std::shared_ptr<std::atomic<std::size_t>> in_flight_;  // the listener's count (it may go first)
};

std::string refusal_detail(ConnectionTable::Refusal why, const ConnectionLimits& limits) {
  if (why == ConnectionTable::Refusal::per_address)
    return "Too many connections from your address: limits.connections_per_address is " +
           std::to_string(limits.per_address) + " and every one of them is serving a request";
  return "Too many connections: limits.connections is " + std::to_string(limits.total) +
         " and every one of them is serving a request";
}

}  // namespace

HttpListener::HttpListener(asio::io_context& ioc, tcp::acceptor acceptor, std::shared_ptr<ServerContext> ctx,
                           std::string tag)
    : ioc_(ioc),
      acceptor_(std::move(acceptor)),
      retry_timer_(acceptor_.get_executor()),
      ctx_(std::move(ctx)),
      tag_(std::move(tag)),
      port_(acceptor_.local_endpoint().port()) {}

void HttpListener::start() {
  asio::post(acceptor_.get_executor(), [self = shared_from_this()] { self->do_accept(); });
}

void HttpListener::close() {
  boost::system::error_code ignored;
  retry_timer_.cancel();
  acceptor_.close(ignored);
}

void HttpListener::do_accept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(asio::make_strand(ioc_), [self = shared_from_this()](auto ec, tcp::socket socket) {
    self->on_accept(ec, std::move(socket));
  });
}

void HttpListener::on_accept(boost::system::error_code ec, tcp::socket socket) {
  if (!acceptor_.is_open() || ec == asio::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors or memory: the backlog waits while we pause instead of spinning.
    log::warn("http", "accept on port {}: {}", port_, ec.message());
    retry_timer_.expires_after(kAcceptRetryDelay);
    retry_timer_.async_wait([self = shared_from_this()](auto wait_ec) {
      if (!wait_ec) self->do_accept();
    });
    return;
  }
  admit(std::move(socket));
  do_accept();
}

void HttpListener::admit(tcp::socket socket) {
  boost::system::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ctx_->stopping.load() || ec) {  // ec: the client has gone already
    socket.close(ec);
    return;
  }
  ConnectionTable::Admission admission = ctx_->connections->admit(peer.address());
  if (admission.slot) {
    count(ctx_->counters.connections_accepted);
    std::make_shared<HttpSession>(std::move(socket), ctx_, tag_, std::move(admission.slot))->start();
    return;
  }
  count(ctx_->counters.connections_rejected);
  const std::string detail = refusal_detail(admission.refused, ctx_->connections->limits());
  log::warn("http", "{}:{}: {}", peer.address().to_string(), peer.port(), detail);
  if (refusing_->fetch_add(1, std::memory_order_relaxed) >= kMaxRefusing) {
    refusing_->fetch_sub(1, std::memory_order_relaxed);
    socket.close(ec);
    return;
  }
  const auto status = admission.refused == ConnectionTable::Refusal::per_address ? http::status::too_many_requests
                                                                                 : http::status::service_unavailable;
  std::make_shared<Refusal>(std::move(socket), status, detail, refusing_)->run();
}

}  // namespace agentbox::http
