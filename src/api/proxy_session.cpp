#include "api/proxy_session.hpp"

#include <sys/socket.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_cat.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "http/access_log.hpp"
#include "http/error.hpp"
#include "net/hop_by_hop.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

using agentbox::net::has_token;
using agentbox::net::is_hop_by_hop;
using agentbox::net::named_by_connection;

namespace {

constexpr std::uint64_t kMaxLingerBytes = 1024 * 1024;
constexpr std::size_t kHeadReadAhead = 16 * 1024;  // the box's bytes read past its head at once

// A WebSocket handshake (RFC 6455 §4.1): the one upgrade passed through.
bool wants_websocket(const http::request_header<>& req) {
  return req.version() >= 11 && req.method() == http::verb::get &&
         has_token(req, http::field::connection, "upgrade") && has_token(req, http::field::upgrade, "websocket");
}

bool is_disconnect(const error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::operation_aborted || ec == http::error::end_of_stream ||
         ec == http::error::partial_message;
}

void append_field(std::string& head, std::string_view name, std::string_view value) {
  head.append(name).append(": ").append(value).append("\r\n");
}

// "203.0.113.7:51234" → "203.0.113.7"; "::1:51234" → "::1".
std::string_view address_of(std::string_view remote) {
  const auto colon = remote.rfind(':');
  return colon == std::string_view::npos ? remote : remote.substr(0, colon);
}

// "2 s", "0.5 s": the limits as the config states them.
std::string seconds(std::chrono::milliseconds d) { return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000); }

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
  auto& parser = *conn_.parser;
  const auto& head = parser.get();
  if (auto length = parser.content_length()) {
    // Content-Length: 0 too is passed on (some servers want a length on every POST).
    request_out_ = Framing::length;
    request_left_ = *length;
    request_in_ = *length > 0 ? Framing::length : Framing::none;
  } else if (parser.chunked() && !parser.is_done()) {
    request_in_ = request_out_ = Framing::chunked;
  }
  upgrade_ = request_in_ == Framing::none && wants_websocket(head);
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
  const std::string refused = fmt::format("Nothing is listening on port {} in your box (connection refused)", target_.port);
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
  do_send_head();
}

// ---------------------------------------------------------------- the request

std::string ProxySession::upstream_head() const {
  const auto& req = conn_.parser->get();
  std::string head;
  head.reserve(1024);
  head.append(req.method_string()).append(" ").append(target_.target).append(" HTTP/1.1\r\n");
  // The server sees the address it was reached at: dev servers refuse unknown Host names.
  append_field(head, "Host", family_ == AF_INET6 ? fmt::format("[::1]:{}", target_.port)
                                                 : fmt::format("127.0.0.1:{}", target_.port));
  for (const auto& field : req) {
    const auto name = field.name_string();
    if (is_hop_by_hop(name) || named_by_connection(req, name)) continue;
    // Authorization holds the API key; framing and forwarding fields are the proxy's own.
    if (field.name() == http::field::host || field.name() == http::field::authorization ||
        field.name() == http::field::content_length)
      continue;
    if (name.size() >= 12 && beast::iequals(name.substr(0, 12), "x-forwarded-")) continue;
    append_field(head, name, field.value());
  }
  append_field(head, "X-Forwarded-For", address_of(conn_.request.remote_address));
  if (auto host = req.find(http::field::host); host != req.end()) append_field(head, "X-Forwarded-Host", host->value());
  append_field(head, "X-Forwarded-Proto", "http");
  append_field(head, "X-Forwarded-Prefix", target_.prefix);
  if (request_out_ == Framing::length) append_field(head, "Content-Length", std::to_string(request_left_));
  if (request_out_ == Framing::chunked) append_field(head, "Transfer-Encoding", "chunked");
  if (upgrade_) {
    append_field(head, "Connection", "Upgrade");
    append_field(head, "Upgrade", "websocket");
  } else {
    append_field(head, "Connection", "close");
  }
  head += "\r\n";
  return head;
}

void ProxySession::do_send_head() {
  auto head = std::make_shared<std::string>(upstream_head());
  asio::async_write(upstream_, asio::buffer(*head), [self = shared_from_this(), head](error_code ec, std::size_t) {
    self->on_send_head(ec);
  });
}

void ProxySession::on_send_head(error_code ec) {
  if (state_ != State::proxying) return;
  if (ec)
    return fail(http::status::bad_gateway,
                fmt::format("Port {} in your box closed the connection: {}", target_.port, ec.message()));
  touch();
  up_buffer_.resize(request_in_ == Framing::none ? 0 : options_.buffer_size);
  do_read_response_head();  // while the body goes up: a server may answer before reading it all
  if (request_in_ == Framing::none) return on_request_sent();
  do_read_request_body();
}

void ProxySession::do_read_request_body() {
  if (request_in_ == Framing::chunked) {  // the parser takes the chunks apart
    auto& body = conn_.parser->get().body();
    body.data = up_buffer_.data();
    body.size = up_buffer_.size();
    http::async_read_some(client_, conn_.buffer, *conn_.parser,
                          [self = shared_from_this()](error_code ec, std::size_t) { self->on_read_request_body(ec, 0); });
    return;
  }
  const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(up_buffer_.size(), request_left_));
  if (conn_.buffer.size() > 0) {  // read with the head already
    const std::size_t n = asio::buffer_copy(asio::buffer(up_buffer_.data(), want), conn_.buffer.data());
    conn_.buffer.consume(n);
    return on_read_request_body({}, n);
  }
  client_.async_read_some(asio::buffer(up_buffer_.data(), want),
                          [self = shared_from_this()](error_code ec, std::size_t n) { self->on_read_request_body(ec, n); });
}

void ProxySession::on_read_request_body(error_code ec, std::size_t n) {
  if (state_ != State::proxying) return;
  bool last = false;
  if (request_in_ == Framing::chunked) {
    n = up_buffer_.size() - conn_.parser->get().body().size;
    if (ec == http::error::need_buffer) ec = {};  // the buffer is full: relay it, then go on
    last = !ec && conn_.parser->is_done();
  } else if (!ec) {
    request_left_ -= n;
    last = request_left_ == 0;
  }
  if (ec) {
    if (is_disconnect(ec)) return do_close();  // the client left in the middle of its body
    return fail(http::status::bad_request, "Malformed request body: " + ec.message());
  }
  if (n > 0) touch();
  if (n == 0 && !last) return do_read_request_body();
  do_write_request_body(n, last);
}

void ProxySession::do_write_request_body(std::size_t n, bool last) {
  auto done = [self = shared_from_this(), last](error_code ec, std::size_t) { self->on_write_request_body(ec, last); };
  const asio::const_buffer piece(up_buffer_.data(), n);
  if (request_out_ != Framing::chunked) return asio::async_write(upstream_, piece, std::move(done));
  if (n == 0) return asio::async_write(upstream_, http::make_chunk_last(), std::move(done));
  if (last) return asio::async_write(upstream_, beast::buffers_cat(http::make_chunk(piece), http::make_chunk_last()), std::move(done));
  asio::async_write(upstream_, http::make_chunk(piece), std::move(done));
}

void ProxySession::on_write_request_body(error_code ec, bool last) {
  if (state_ != State::proxying) return;
  if (ec) {
    // The server stopped taking the body (it may have answered already): its response decides.
    request_failed_ = true;
    if (!head_received_) arm_phase(Phase::response, options_.response_timeout);
    return;
  }
  touch();
  if (last) return on_request_sent();
  do_read_request_body();
}

void ProxySession::on_request_sent() {
  request_sent_ = true;
  if (!head_received_) arm_phase(Phase::response, options_.response_timeout);
  if (!upgrade_) do_watch_client();
}

// ---------------------------------------------------------------- the response

void ProxySession::do_read_response_head() {
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
      return fail(http::status::bad_gateway, fmt::format("The response head from port {} is over {} bytes",
                                                         target_.port, options_.header_limit));
    if (is_disconnect(ec))
      return fail(http::status::bad_gateway,
                  fmt::format("Port {} in your box closed the connection without answering", target_.port));
    return fail(http::status::bad_gateway,
                fmt::format("Port {} in your box sent a malformed response: {}", target_.port, ec.message()));
  }
  touch();
  auto& parser = *response_parser_;
  const unsigned code = parser.get().result_int();
  if (code == 101) {
    if (!upgrade_)
      return fail(http::status::bad_gateway,
                  fmt::format("Port {} in your box switched protocols unasked", target_.port));
    head_received_ = true;
    disarm_phase();
    status_ = code;
    return do_write_client_head(client_head(false), false);
  }
  if (code < 200) {
    // Interim (100 Continue, 103 Early Hints): relayed to HTTP/1.1 clients, then the next head.
    if (conn_.parser->get().version() >= 11) return do_write_client_head(client_head(true), true);
    return do_read_response_head();
  }
  head_received_ = true;
  disarm_phase();
  status_ = code;
  const bool http11 = conn_.parser->get().version() >= 11;
  if (parser.is_done()) {  // HEAD, 204, 304, an empty body
    response_in_ = response_out_ = Framing::none;
  } else if (auto length = parser.content_length()) {
    response_in_ = response_out_ = Framing::length;
    response_left_ = *length;
  } else {
    response_in_ = parser.chunked() ? Framing::chunked : Framing::eof;
    // Chunks let an HTTP/1.1 client tell a complete body from a cut one.
    response_out_ = http11 ? Framing::chunked : Framing::eof;
  }
  do_write_client_head(client_head(false), false);
}

std::string ProxySession::client_head(bool interim) const {
  const auto& res = response_parser_->get();
  std::string head;
  head.reserve(1024);
  head.append("HTTP/1.1 ").append(std::to_string(res.result_int())).append(" ").append(res.reason()).append("\r\n");
  const bool switching = res.result() == http::status::switching_protocols;
  for (const auto& field : res) {
    const auto name = field.name_string();
    if (is_hop_by_hop(name) || named_by_connection(res, name)) continue;
    // A bodiless answer (HEAD) keeps the length it announces; a body's length is set below.
    if (field.name() == http::field::content_length && response_in_ != Framing::none) continue;
    append_field(head, name, field.value());
  }
  if (switching) {
    append_field(head, "Connection", "Upgrade");
    append_field(head, "Upgrade", "websocket");
  } else if (!interim) {
    if (response_out_ == Framing::length) append_field(head, "Content-Length", std::to_string(response_left_));
    if (response_out_ == Framing::chunked) append_field(head, "Transfer-Encoding", "chunked");
    append_field(head, "Connection", "close");
  }
  if (!options_.node_name.empty()) append_field(head, "X-Agentbox-Node", options_.node_name);
  head += "\r\n";
  return head;
}

void ProxySession::do_write_client_head(std::string head, bool interim) {
  if (!interim) head_started_ = true;
  client_writing_ = true;
  auto text = std::make_shared<std::string>(std::move(head));
  asio::async_write(client_, asio::buffer(*text), [self = shared_from_this(), text, interim](error_code ec, std::size_t) {
    self->on_write_client_head(ec, interim);
  });
}

void ProxySession::on_write_client_head(error_code ec, bool interim) {
  client_writing_ = false;
  if (state_ != State::proxying) return;
  if (ec) return do_close();  // the client left
  touch();
  if (interim) return do_read_response_head();
  if (status_ == 101) return do_tunnel();
  if (response_in_ == Framing::none) return do_linger();  // complete
  down_buffer_.resize(options_.buffer_size);
  do_read_response_body();
}

void ProxySession::do_read_response_body() {
  if (response_in_ == Framing::chunked) {  // the parser takes the chunks apart
    auto& body = response_parser_->get().body();
    body.data = down_buffer_.data();
    body.size = down_buffer_.size();
    http::async_read_some(upstream_, response_head_buffer_, *response_parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) { self->on_read_response_body(ec, 0); });
    return;
  }
  std::size_t want = down_buffer_.size();
  if (response_in_ == Framing::length) want = static_cast<std::size_t>(std::min<std::uint64_t>(want, response_left_));
  if (response_head_buffer_.size() > 0) {  // read with the head already
    const std::size_t n = asio::buffer_copy(asio::buffer(down_buffer_.data(), want), response_head_buffer_.data());
    response_head_buffer_.consume(n);
    return on_read_response_body({}, n);
  }
  upstream_.async_read_some(asio::buffer(down_buffer_.data(), want),
                            [self = shared_from_this()](error_code ec, std::size_t n) { self->on_read_response_body(ec, n); });
}

void ProxySession::on_read_response_body(error_code ec, std::size_t n) {
  if (state_ != State::proxying) return;
  bool last = false;
  if (response_in_ == Framing::chunked) {
    n = down_buffer_.size() - response_parser_->get().body().size;
    if (ec == http::error::need_buffer) ec = {};
    last = !ec && response_parser_->is_done();
  } else if (response_in_ == Framing::length) {
    if (!ec) response_left_ -= n;
    last = !ec && response_left_ == 0;
  } else if (ec == asio::error::eof) {  // Framing::eof: the end of the connection ends the body
    ec = {};
    last = true;
  }
  // A box server that fails mid-body: cut the client's connection too, so it sees the loss.
  if (ec) return do_close();
  if (n > 0) touch();
  if (n == 0 && !last) return do_read_response_body();
  do_write_response_body(n, last);
}

void ProxySession::do_write_response_body(std::size_t n, bool last) {
  client_writing_ = true;
  body_bytes_ += n;
  auto done = [self = shared_from_this(), last](error_code ec, std::size_t) { self->on_write_response_body(ec, last); };
  const asio::const_buffer piece(down_buffer_.data(), n);
  if (response_out_ != Framing::chunked) {
    if (n == 0) return asio::post(strand_, [done = std::move(done)]() mutable { done({}, 0); });
    return asio::async_write(client_, piece, std::move(done));
  }
  if (n == 0) return asio::async_write(client_, http::make_chunk_last(), std::move(done));
  if (last) return asio::async_write(client_, beast::buffers_cat(http::make_chunk(piece), http::make_chunk_last()), std::move(done));
  asio::async_write(client_, http::make_chunk(piece), std::move(done));
}

void ProxySession::on_write_response_body(error_code ec, bool last) {
  client_writing_ = false;
  if (state_ != State::proxying) return;
  if (ec) return do_close();  // the client left
  touch();
  if (last) return do_linger();
  do_read_response_body();
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
  asio::async_write(to, asio::buffer(buffer.data(), n), [self = shared_from_this(), dir](error_code e, std::size_t) {
    self->on_tunnel_write(dir, e);
  });
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
  http_logger()->info("{} \"{} {}\": {}", conn_.request.remote_address,
                      std::string_view(conn_.parser->get().method_string()), loggable_target(conn_.request.target),
                      detail);
  // Once a response is on its way the only honest signal left is a cut connection.
  if (head_started_ || client_writing_ || state_ == State::tunnel) return do_close();
  do_answer(error_response(status, detail));
}

void ProxySession::do_answer(Response response) {
  state_ = State::answering;
  status_ = static_cast<unsigned>(response.status);
  error_code ignored;
  upstream_.close(ignored);
  client_.cancel(ignored);  // a body read or the client watch: the answer comes first
  idle_timer_.cancel();
  arm_phase(Phase::linger, options_.linger_timeout);  // bounds the write as well
  std::string text = fmt::format("HTTP/1.1 {} {}\r\n", status_, http::obsolete_reason(response.status));
  for (const auto& field : response.headers) append_field(text, field.name_string(), field.value());
  append_field(text, "Content-Length", std::to_string(response.body.size()));
  append_field(text, "Connection", "close");
  text += "\r\n";
  if (conn_.parser->get().method() != http::verb::head) {
    text += response.body;
    body_bytes_ = response.body.size();
  }
  auto message = std::make_shared<std::string>(std::move(text));
  asio::async_write(client_, asio::buffer(*message), [self = shared_from_this(), message](error_code ec, std::size_t) {
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
  client_.async_read_some(asio::buffer(linger_buffer_), [self = shared_from_this()](error_code ec, std::size_t n) {
    self->on_linger(ec, n);
  });
}

void ProxySession::on_linger(error_code ec, std::size_t n) {
  if (state_ != State::lingering) return;
  linger_bytes_ += n;
  if (ec || linger_bytes_ > kMaxLingerBytes) return do_close();
  client_.async_read_some(asio::buffer(linger_buffer_), [self = shared_from_this()](error_code e, std::size_t m) {
    self->on_linger(e, m);
  });
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
  log_access({conn_.parser->get().method_string(), conn_.request.target, status_, body_bytes_,
              Clock::now() - started_, conn_.request.remote_address});
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
        fail(http::status::gateway_timeout, fmt::format("Port {} in your box did not answer within {}",
                                                        target_.port, seconds(options_.response_timeout)));
      break;
    case Phase::linger:
      do_close();
      break;
    case Phase::none:
      break;
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
