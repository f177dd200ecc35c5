#include "api/proxy_session.hpp"

#include <sys/socket.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <cerrno>
#include <iterator>

#include <fmt/format.h>

#include "http/access_log.hpp"
#include "http/error.hpp"
#include "net/hop_by_hop.hpp"
#include "util/log.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

using agentbox::net::has_token;
using agentbox::net::RelayEnd;
using agentbox::net::RelayStep;
using agentbox::net::remove_hop_by_hop;

namespace {

constexpr std::uint64_t kMaxLingerBytes = 1024 * 1024;
constexpr std::size_t kHeadReadAhead = 16 * 1024;  // the box's bytes read past its head at once

// A WebSocket handshake (RFC 6455 §4.1): the one upgrade passed through.
bool wants_websocket(const http::request_header<>& req) {
  return req.version() >= 11 && req.method() == http::verb::get && has_token(req, http::field::connection, "upgrade") &&
         has_token(req, http::field::upgrade, "websocket");
}

bool is_disconnect(const error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::operation_aborted || ec == http::error::end_of_stream || ec == http::error::partial_message;
}

// Fields the proxy writes itself: who the client is and how it came (X-Forwarded-*), where the
// box's server is reached (Host), and the API key (Authorization), which never enters a box.
bool is_proxys_own(const http::fields::value_type& field) {
  const auto name = field.name_string();
  return field.name() == http::field::host || field.name() == http::field::authorization ||
         (name.size() >= 12 && beast::iequals(name.substr(0, 12), "x-forwarded-"));
}

// "203.0.113.7:51234" → "203.0.113.7"; "::1:51234" → "::1".
std::string_view address_of(std::string_view remote) {
  const auto colon = remote.rfind(':');
  return colon == std::string_view::npos ? remote : remote.substr(0, colon);
}

// "2 s", "0.5 s": the limits as the config states them.
std::string seconds(std::chrono::milliseconds d) {
  return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000);
}

}  // namespace

ProxySession::ProxySession(Takeover conn, ProxyOptions options)
    : conn_(std::move(conn)),
      options_(options),
      strand_(conn_.socket.get_executor()),
      client_(conn_.socket),
      upstream_(strand_),
      phase_timer_(strand_),
      idle_timer_(strand_),
      started_(Clock::now()),
      last_activity_(started_),
      response_head_buffer_(options_.header_limit + kHeadReadAhead) {}

ProxySession::~ProxySession() = default;

void ProxySession::start(ProxyTarget target) {
  target_ = std::move(target);
  // A WebSocket handshake has no body: the connection is the tunnel's after the 101.
  upgrade_ = conn_.parser->is_done() && wants_websocket(conn_.parser->get());
  touch();
  arm_idle();
  arm_phase(Phase::connect, options_.connect_timeout);  // covers making the socket and connecting
  do_open(AF_INET);
}

void ProxySession::reject(Response response) { do_answer(std::move(response)); }

// ---------------------------------------------------------------- connecting

void ProxySession::do_open(int family) {
  family_ = family;
  // The socket is made on another thread. Only the timers keep this session alive meanwhile, so
  // a session dropped with its io_context is not revived from there; and the other thread never
  // holds it, so its last owner (and its timers' destructors) is always the io_context's.
  target_.open(family, [weak = weak_from_this(), strand = strand_](UniqueFd fd, std::string why) {
    asio::post(strand, [weak, fd = std::move(fd), why = std::move(why)]() mutable {
      if (auto self = weak.lock()) self->on_open(std::move(fd), std::move(why));
    });
  });
}

void ProxySession::on_open(UniqueFd fd, std::string why) {
  if (state_ != State::connecting) return;
  const std::string refused =
      fmt::format("Nothing is listening on port {} in your box (connection refused)", target_.port);
  if (!fd) {
    // An IPv6 socket that cannot be made (IPv6 off) leaves the IPv4 answer: refused.
    if (family_ == AF_INET6) return fail(http::status::bad_gateway, refused);
    return fail(http::status::bad_gateway, fmt::format("Cannot reach port {}: {}", target_.port, why));
  }
  error_code ec;
  upstream_.assign(family_ == AF_INET6 ? tcp::v6() : tcp::v4(), fd.get(), ec);
  if (ec) return fail(http::status::bad_gateway, fmt::format("Cannot reach port {}: {}", target_.port, ec.message()));
  fd.release();
  const asio::ip::address loopback = family_ == AF_INET6 ? asio::ip::address(asio::ip::address_v6::loopback())
                                                         : asio::ip::address(asio::ip::address_v4::loopback());
  upstream_.async_connect(tcp::endpoint(loopback, target_.port),
                          [self = shared_from_this()](error_code e) { self->on_connect(e); });
}

void ProxySession::on_connect(error_code ec) {
  if (state_ != State::connecting) return;
  if (ec) {
    error_code ignored;
    upstream_.close(ignored);
    // Servers that listen on "localhost" often take ::1 only (Node, for one): try it too.
    if (family_ == AF_INET && ec == asio::error::connection_refused) return do_open(AF_INET6);
    if (family_ == AF_INET6 || ec == asio::error::connection_refused)
      return fail(http::status::bad_gateway,
                  fmt::format("Nothing is listening on port {} in your box (connection refused)", target_.port));
    return fail(http::status::bad_gateway,
                fmt::format("Connecting to port {} in your box: {}", target_.port, ec.message()));
  }
  disarm_phase();
  state_ = State::proxying;
  touch();
  error_code ignored;  // small writes (events, frames) go out at once
  upstream_.set_option(tcp::no_delay(true), ignored);
  client_.set_option(tcp::no_delay(true), ignored);
  do_read_response_head();  // while the request goes up: a server may answer before reading it all
  do_relay_request();
}

// ---------------------------------------------------------------- the request

// The client's head, made the box server's: its target, Host as the server is reached (dev
// servers refuse unknown names), X-Forwarded-* for the client; hop-by-hop fields and the API key
// stay here. The body keeps its framing (Content-Length, chunked).
void ProxySession::prepare_request_head() {
  auto& req = conn_.parser->get();
  const std::string client_host(req[http::field::host]);
  remove_hop_by_hop(req);
  for (auto it = req.begin(); it != req.end();) it = is_proxys_own(*it) ? req.erase(it) : std::next(it);
  req.target(target_.target);
  req.version(11);
  req.set(http::field::host,
          family_ == AF_INET6 ? fmt::format("[::1]:{}", target_.port) : fmt::format("127.0.0.1:{}", target_.port));
  req.set("X-Forwarded-For", address_of(conn_.request.remote_address));
  if (!client_host.empty()) req.set("X-Forwarded-Host", client_host);
  req.set("X-Forwarded-Proto", "http");
  req.set("X-Forwarded-Prefix", target_.prefix);
  if (upgrade_) {
    req.set(http::field::connection, "Upgrade");
    req.set(http::field::upgrade, "websocket");
  } else {
    req.keep_alive(false);  // one request per connection to the box
  }
}

void ProxySession::do_relay_request() {
  prepare_request_head();
  request_out_.emplace(conn_.parser->get());
  if (!conn_.parser->is_done()) up_buffer_.resize(options_.buffer_size);
  // The head goes first: the server may answer it (Expect: 100-continue, an early refusal).
  net::async_relay_message(
      client_, conn_.buffer, *conn_.parser, upstream_, *request_out_, {.buffer = up_buffer_, .head_first = true},
      [this](RelayStep, std::string_view) { touch(); },
      [self = shared_from_this()](RelayEnd end) { self->on_request_relayed(end); });
}

void ProxySession::on_request_relayed(const RelayEnd& end) {
  if (state_ != State::proxying) return;
  if (!end.ec) return on_request_sent();
  if (end.failed == RelayStep::read) {
    if (is_disconnect(end.ec)) return do_close();  // the client left in the middle of its body
    return fail(http::status::bad_request, "Malformed request body: " + end.ec.message());
  }
  // The server stopped taking the request (it may have answered already): its response decides.
  if (!head_received_) arm_phase(Phase::response, options_.response_timeout);
}

void ProxySession::on_request_sent() {
  if (!head_received_) arm_phase(Phase::response, options_.response_timeout);
  if (!upgrade_) do_watch_client();
}

// ---------------------------------------------------------------- the response

void ProxySession::do_read_response_head() {
  response_out_.reset();  // of the interim head before, if any
  response_parser_.emplace();
  response_parser_->header_limit(options_.header_limit);
  response_parser_->body_limit(boost::none);  // bodies stream; the idle timeout bounds them in time
  if (conn_.parser->get().method() == http::verb::head) response_parser_->skip(true);
  http::async_read_header(upstream_, response_head_buffer_, *response_parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) { self->on_read_response_head(ec); });
}

void ProxySession::on_read_response_head(error_code ec) {
  if (state_ != State::proxying) return;
  if (ec) {
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
      return fail(http::status::bad_gateway,
                  fmt::format("The response head from port {} is over {} bytes", target_.port, options_.header_limit));
    if (is_disconnect(ec))
      return fail(http::status::bad_gateway,
                  fmt::format("Port {} in your box closed the connection without answering", target_.port));
    return fail(http::status::bad_gateway,
                fmt::format("Port {} in your box sent a malformed response: {}", target_.port, ec.message()));
  }
  touch();
  const unsigned code = response_parser_->get().result_int();
  if (code == 101 && !upgrade_)
    return fail(http::status::bad_gateway, fmt::format("Port {} in your box switched protocols unasked", target_.port));
  if (code < 200 && code != 101) {
    // Interim (100 Continue, 103 Early Hints): relayed to HTTP/1.1 clients, then the next head.
    if (conn_.parser->get().version() >= 11) return do_relay_response(/*interim=*/true);
    return do_read_response_head();
  }
  head_received_ = true;
  disarm_phase();
  status_ = code;
  do_relay_response(/*interim=*/false);
}

// The box's head, made the client's: hop-by-hop fields stay with the box; a body the box ends
// by closing goes to an HTTP/1.1 client chunked, so it can tell a complete body from a cut one
// (and an HTTP/1.0 client gets bodies that end with the connection); one answer per connection.
void ProxySession::prepare_response_head(bool interim) {
  auto& parser = *response_parser_;
  auto& res = parser.get();
  remove_hop_by_hop(res);
  res.version(11);
  if (res.result() == http::status::switching_protocols) {
    res.set(http::field::connection, "Upgrade");
    res.set(http::field::upgrade, "websocket");
  } else if (!interim) {
    const bool http11 = conn_.parser->get().version() >= 11;
    if (!parser.is_done() && !parser.content_length()) res.chunked(http11);
    res.keep_alive(false);
  }
  if (!options_.node_name.empty()) res.set("X-Agentbox-Node", options_.node_name);
}

void ProxySession::do_relay_response(bool interim) {
  if (interim) {
    client_writing_ = true;
  } else {
    head_started_ = true;
    conn_.report(status_);  // the box's answer (101: a WebSocket tunnel from here on)
  }
  prepare_response_head(interim);
  response_out_.emplace(response_parser_->get());
  if (!response_parser_->is_done() && down_buffer_.empty()) down_buffer_.resize(options_.buffer_size);
  net::async_relay_message(
      upstream_, response_head_buffer_, *response_parser_, client_, *response_out_, {.buffer = down_buffer_},
      [this](RelayStep, std::string_view) { touch(); },
      [self = shared_from_this(), interim](RelayEnd end) { self->on_response_relayed(end, interim); });
}

void ProxySession::on_response_relayed(const RelayEnd& end, bool interim) {
  client_writing_ = false;
  body_bytes_ += end.bytes;
  if (state_ != State::proxying) return;
  // A box server that fails mid-body, or a client that left: cut the connection, so the client
  // sees the loss (a body shorter than announced, no last chunk).
  if (end.ec) return do_close();
  touch();
  if (interim) return do_read_response_head();
  if (status_ == 101) return do_tunnel();
  do_linger();  // complete
}

// ---------------------------------------------------------------- WebSocket tunnel

void ProxySession::do_tunnel() {
  state_ = State::tunnel;
  up_buffer_.resize(options_.buffer_size);
  down_buffer_.resize(options_.buffer_size);
  arm_idle();  // now with the tunnel's limit
  // Bytes either side sent right behind its head were read with it: they go first.
  for (Dir dir : {up, down}) {
    auto& early = dir == up ? conn_.buffer : response_head_buffer_;
    auto& to = dir == up ? upstream_ : client_;
    if (early.size() == 0) {
      do_tunnel_read(dir);
      continue;
    }
    asio::async_write(to, early.data(), [self = shared_from_this(), dir](error_code ec, std::size_t n) {
      (dir == up ? self->conn_.buffer : self->response_head_buffer_).consume(n);
      self->on_tunnel_write(dir, ec);
    });
  }
}

void ProxySession::do_tunnel_read(Dir dir) {
  auto& from = dir == up ? client_ : upstream_;
  auto& buffer = dir == up ? up_buffer_ : down_buffer_;
  from.async_read_some(asio::buffer(buffer), [self = shared_from_this(), dir](error_code ec, std::size_t n) {
    self->on_tunnel_read(dir, ec, n);
  });
}

void ProxySession::on_tunnel_read(Dir dir, error_code ec, std::size_t n) {
  if (state_ != State::tunnel) return;
  auto& to = dir == up ? upstream_ : client_;
  if (ec == asio::error::eof) {  // this direction is over: pass the end on, the other goes on
    tunnel_ended_[dir] = true;
    error_code ignored;
    to.shutdown(tcp::socket::shutdown_send, ignored);
    if (tunnel_ended_[up] && tunnel_ended_[down]) do_close();
    return;
  }
  if (ec) return do_close();
  touch();
  if (dir == down) body_bytes_ += n;
  auto& buffer = dir == up ? up_buffer_ : down_buffer_;
  asio::async_write(to, asio::buffer(buffer.data(), n),
                    [self = shared_from_this(), dir](error_code e, std::size_t) { self->on_tunnel_write(dir, e); });
}

void ProxySession::on_tunnel_write(Dir dir, error_code ec) {
  if (state_ != State::tunnel) return;
  if (ec) return do_close();
  touch();
  do_tunnel_read(dir);
}

// ---------------------------------------------------------------- a client that leaves

void ProxySession::do_watch_client() {
  client_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) { self->on_watch_client(ec); });
}

void ProxySession::on_watch_client(error_code ec) {
  if (ec || state_ != State::proxying) return;
  char byte;
  const ssize_t n = ::recv(client_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return;  // input past this request: never read, the connection closes after the response
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return do_watch_client();
  do_close();  // the client left: let go of the box's server too
}

// ---------------------------------------------------------------- ending

void ProxySession::fail(http::status status, std::string detail) {
  if (state_ == State::answering || state_ == State::lingering || state_ == State::closed) return;
  log::info("http", "{} \"{} {}\": {}", conn_.request.remote_address,
            std::string_view(conn_.parser->get().method_string()), loggable_target(conn_.request.target), detail);
  // Once a response is on its way the only honest signal left is a cut connection.
  if (head_started_ || client_writing_ || state_ == State::tunnel) return do_close();
  do_answer(error_response(status, detail));
}

void ProxySession::do_answer(Response response) {
  state_ = State::answering;
  status_ = static_cast<unsigned>(response.status);
  conn_.report(status_);
  error_code ignored;
  upstream_.close(ignored);
  client_.cancel(ignored);  // a body read or the client watch: the answer comes first
  idle_timer_.cancel();
  arm_phase(Phase::linger, options_.linger_timeout);  // bounds the write as well
  auto message = std::make_shared<http::response<http::string_body>>(response.status, 11);
  for (const auto& field : response.headers) message->insert(field.name_string(), field.value());
  message->keep_alive(false);
  if (conn_.parser->get().method() == http::verb::head) {
    message->content_length(response.body.size());  // what a GET would get; no body
  } else {
    body_bytes_ = response.body.size();
    message->body() = std::move(response.body);
    message->prepare_payload();
  }
  http::async_write(client_, *message, [self = shared_from_this(), message](error_code ec, std::size_t) {
    if (self->state_ != State::answering) return;
    if (ec) return self->do_close();
    self->do_linger();
  });
}

// The response is complete, but the client may still be sending (a body the server did not
// wait for): closing now would reset the connection and could destroy the answer in flight.
// Stop sending, drain for a moment, then close.
void ProxySession::do_linger() {
  if (state_ == State::lingering || state_ == State::closed) return;
  state_ = State::lingering;
  error_code ignored;
  upstream_.close(ignored);
  client_.cancel(ignored);
  idle_timer_.cancel();
  client_.shutdown(tcp::socket::shutdown_send, ignored);
  arm_phase(Phase::linger, options_.linger_timeout);
  client_.async_read_some(asio::buffer(linger_buffer_),
                          [self = shared_from_this()](error_code ec, std::size_t n) { self->on_linger(ec, n); });
}

void ProxySession::on_linger(error_code ec, std::size_t n) {
  if (state_ != State::lingering) return;
  linger_bytes_ += n;
  if (ec || linger_bytes_ > kMaxLingerBytes) return do_close();
  client_.async_read_some(asio::buffer(linger_buffer_),
                          [self = shared_from_this()](error_code e, std::size_t m) { self->on_linger(e, m); });
}

void ProxySession::do_close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  disarm_phase();
  idle_timer_.cancel();
  error_code ignored;
  client_.shutdown(tcp::socket::shutdown_both, ignored);
  client_.close(ignored);
  upstream_.close(ignored);
  log_access({conn_.parser->get().method_string(), conn_.request.target, status_, body_bytes_, Clock::now() - started_,
              conn_.request.remote_address});
}

// ---------------------------------------------------------------- deadlines

void ProxySession::arm_phase(Phase phase, std::chrono::milliseconds after) {
  phase_ = phase;
  phase_timer_.expires_after(after);
  phase_timer_.async_wait([self = shared_from_this(), phase, generation = ++phase_generation_](error_code ec) {
    if (!ec) self->on_phase_timer(phase, generation);
  });
}

void ProxySession::disarm_phase() {
  ++phase_generation_;  // a handler already queued with success sees a stale generation
  phase_ = Phase::none;
  phase_timer_.cancel();
}

void ProxySession::on_phase_timer(Phase phase, std::uint64_t generation) {
  if (generation != phase_generation_ || state_ == State::closed) return;
  switch (phase) {
    case Phase::connect:
      if (state_ == State::connecting)
        fail(http::status::gateway_timeout, fmt::format("Connecting to port {} in your box took longer than {}",
                                                        target_.port, seconds(options_.connect_timeout)));
      break;
    case Phase::response:
      if (state_ == State::proxying && !head_received_)
        fail(http::status::gateway_timeout, fmt::format("Port {} in your box did not answer within {}", target_.port,
                                                        seconds(options_.response_timeout)));
      break;
    case Phase::linger: do_close(); break;
    case Phase::none: break;
  }
}

void ProxySession::touch() { last_activity_ = Clock::now(); }

// One watchdog instead of a timer per read and write: it wakes at the last activity plus the
// limit, and sleeps again if something moved since.
void ProxySession::arm_idle() {
  const auto limit = state_ == State::tunnel ? options_.tunnel_idle_timeout : options_.idle_timeout;
  idle_timer_.expires_at(last_activity_ + limit);
  idle_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->on_idle_timer();
  });
}

void ProxySession::on_idle_timer() {
  if (state_ != State::connecting && state_ != State::proxying && state_ != State::tunnel) return;
  const auto limit = state_ == State::tunnel ? options_.tunnel_idle_timeout : options_.idle_timeout;
  if (Clock::now() < last_activity_ + limit) return arm_idle();
  fail(http::status::gateway_timeout,
       fmt::format("Nothing moved to or from port {} in your box for {}", target_.port, seconds(limit)));
}

}  // namespace agentbox::api
