#include "net/egress_session.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "audit/trail.hpp"
#include "metrics/events.hpp"
#include "net/body_relay.hpp"
#include "net/hop_by_hop.hpp"
#include "net/socket_buffers.hpp"
#include "net/splice_relay.hpp"
#include "store/box_key.hpp"

namespace agentbox::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr std::string_view kTunnelEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

IpAddress address_of(const tcp::endpoint& endpoint) {
  IpAddress ip;
  if (endpoint.address().is_v4()) {
    auto bytes = endpoint.address().to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), ip.bytes.begin());
  } else {
    ip.family = AF_INET6;
    auto bytes = endpoint.address().to_v6().to_bytes();
    std::copy(bytes.begin(), bytes.end(), ip.bytes.begin());
  }
  return ip;
}

tcp::endpoint endpoint_of(const IpAddress& ip, uint16_t port) {
  sockaddr_storage ss;
  ip.to_sockaddr(port, ss);
  tcp::endpoint endpoint;
  std::memcpy(endpoint.data(), &ss, ip.family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  return endpoint;
}

// The socket's deadline passed: the operation ended because its socket was closed for it.
bool timed_out(const error_code& ec, const Deadline& deadline) { return ec && deadline.expired(); }

bool is_quiet_end(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::operation_aborted;
}

std::string seconds(std::chrono::milliseconds ms) { return std::to_string((ms.count() + 999) / 1000) + " s"; }

// Accounts whose buckets the context keeps before it forgets the full ones (a full bucket is
// what a new one would be).
constexpr size_t kTokenBucketsKept = 256;

}  // namespace

std::shared_ptr<const HostAddresses::Set> EgressContext::host_addresses() const {
  std::lock_guard lock(mu_);
  return host_addresses_ ? host_addresses_->current() : nullptr;
}

bool EgressContext::take_connect_token(const std::string& account) const {
  const uint32_t rate = limits_.connect_rate;
  if (rate == 0) return true;
  // A box may open at once what it may hold open (a tool's pool of connections at its start);
  // past that, TIME_WAIT grows at the rate only.
  const double burst = std::max<double>(rate, static_cast<double>(limits_.connections_per_account));
  const auto now = TokenBucket::Clock::now();
  std::lock_guard lock(tokens_mu_);
  auto it = connect_tokens_.find(account);
  if (it == connect_tokens_.end()) {
    if (connect_tokens_.size() >= kTokenBucketsKept)
      std::erase_if(connect_tokens_, [&](auto& entry) { return entry.second.full(now); });
    it = connect_tokens_.try_emplace(account, rate, burst, now).first;
  }
  return it->second.take(now);
}

EgressSession::EgressSession(tcp::socket client, std::shared_ptr<EgressAccount> who,
                             std::shared_ptr<const EgressContext> context)
    : client_(std::move(client)),
      upstream_(client_.get_executor()),
      client_deadline_(client_.get_executor()),
      upstream_deadline_(client_.get_executor()),
      who_(std::move(who)),
      context_(std::move(context)) {
  ++who_->open;
  // A relay's writes are whole pieces of a message: each goes now, not after the peer's ACK of
  // the last (Nagle's wait meets the peer's delayed ACK: 40 ms per answer).
  boost::system::error_code ignored;
  client_.set_option(tcp::no_delay(true), ignored);
}

EgressSession::~EgressSession() { release_slot(); }

// Before the client can see its connection end: a client that opens the next one at once
// (one connection allowed) must find the slot free, not a 429.
void EgressSession::release_slot() {
  if (std::exchange(holds_slot_, false)) --who_->open;
}

void EgressSession::start() {
  // A deadline that passes closes its socket: the operation waiting on it ends, and its
  // handler sees timed_out().
  std::weak_ptr<EgressSession> weak = weak_from_this();
  client_deadline_.watch(weak, [this] {
    error_code ignored;
    client_.close(ignored);
  });
  upstream_deadline_.watch(weak, [this] {
    error_code ignored;
    upstream_.close(ignored);
  });
  const size_t cap = context_->limits().connections_per_account;
  if (who_->open > cap)
    return answer(http::status::too_many_requests,
                  fmt::format("agentbox: this sandbox may have {} connection{} open through its proxy at once; "
                              "close some and retry",
                              cap, cap == 1 ? "" : "s"));
  do_read_head();
}

std::span<char> EgressSession::body_buffer() {
  if (!body_buffer_) body_buffer_ = std::make_unique_for_overwrite<char[]>(kBodyBufferSize);
  return {body_buffer_.get(), kBodyBufferSize};
}

void EgressSession::do_read_head() {
  request_.emplace();
  request_->header_limit(context_->limits().header_limit);
  request_->body_limit(boost::none);  // bodies stream through; nothing is held whole
  bytes_up_ = bytes_down_ = 0;
  connected_to_.clear();
  upstream_reused_ = false;
  client_deadline_.expires_after(context_->limits().header_timeout);
  http::async_read_header(client_, client_buffer_, *request_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_read_head(ec); });
}

void EgressSession::on_read_head(error_code ec) {
  // A head that takes too long is cut off: its deadline has closed the socket already.
  if (timed_out(ec, client_deadline_) || is_quiet_end(ec)) return close();
  if (ec == http::error::header_limit)
    return answer(
        http::status::request_header_fields_too_large,
        "agentbox: the request head is larger than " + std::to_string(context_->limits().header_limit) + " bytes");
  if (ec) return answer(http::status::bad_request, "agentbox: malformed request (" + ec.message() + ")");
  client_deadline_.expires_never();
  try {
    target_ = parse_proxy_request(request_->get().base());
  } catch (const ProxyRequestError& e) {
    return answer(e.status, e.what());
  }
  client_keep_alive_ = target_.kind == ProxyRequest::Kind::forward && request_->get().keep_alive();
  // The policy is made again only when the configuration changed (SIGHUP), not per request.
  if (auto config = context_->config(); config != config_) {
    config_ = std::move(config);
    // A profile's box (its key NAME~PROFILE) adds the profile's rules to the user's.
    policy_ = config_->policy_for(who_->user, profile_of_box(who_->account));
  }
  Verdict verdict = check_name(policy_, target_.host, target_.port);
  if (!verdict.allowed) return refuse(verdict.reason);
  allowed_by_ = verdict.reason;
  if (can_reuse_upstream()) {
    upstream_reused_ = true;
    connected_to_ = upstream_address_;
    return do_forward();
  }
  drop_upstream();
  do_resolve();
}

bool EgressSession::can_reuse_upstream() const {
  if (!upstream_kept_ || target_.kind != ProxyRequest::Kind::forward) return false;
  if (target_.host != upstream_host_ || target_.port != upstream_port_ || config_ != upstream_config_) return false;
  // Only a request that can be sent again whole: no body (it streams from the client once).
  return !request_->chunked() && request_->content_length().value_or(0) == 0;
}

void EgressSession::drop_upstream() {
  upstream_kept_ = false;
  upstream_config_.reset();
  upstream_buffer_.clear();
  error_code ignored;
  upstream_.close(ignored);
}

bool EgressSession::retried_on_new_connection(const error_code& ec) {
  // Closed by the origin while it sat idle: the write fails or the read ends before a byte.
  bool closed = ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
                ec == asio::error::broken_pipe;
  if (!upstream_reused_ || !closed) return false;
  upstream_reused_ = false;
  connected_to_.clear();
  drop_upstream();
  response_.reset();
  request_out_.reset();
  do_resolve();
  return true;
}

void EgressSession::do_resolve() {
  if (auto mapped = config_->hosts.find(target_.host); mapped != config_->hosts.end())
    return on_resolve({}, {endpoint_of(mapped->second, target_.port)});
  if (std::optional<IpAddress> literal = IpAddress::parse(target_.host))
    return on_resolve({}, {endpoint_of(*literal, target_.port)});
  // Off the loop, fairly between accounts; the answer comes back to this session's strand.
  context_->resolver().resolve(
      who_->account, target_.host, target_.port,
      [self = shared_from_this()](error_code ec, std::vector<tcp::endpoint> found) {
        asio::post(self->client_.get_executor(),
                   [self, ec, found = std::move(found)]() mutable { self->on_resolve(ec, std::move(found)); });
      });
}

void EgressSession::on_resolve(error_code ec, std::vector<tcp::endpoint> found) {
  if (ec || found.empty()) {
    std::string why = "agentbox: cannot resolve " + target_.host + (ec ? " (" + ec.message() + ")" : "");
    record(true, allowed_by_ + "; " + why.substr(10));
    return answer(http::status::bad_gateway, why);
  }
  // Every address is checked; only allowed ones are tried, in the resolver's order.
  std::vector<tcp::endpoint> allowed;
  std::string first_refusal;
  const std::shared_ptr<const HostAddresses::Set> host_addresses = context_->host_addresses();
  static const HostAddresses::Set kNone;
  for (const tcp::endpoint& endpoint : found) {
    Verdict verdict = check_address(policy_, target_.host, target_.port, address_of(endpoint),
                                    host_addresses ? *host_addresses : kNone);
    if (verdict.allowed)
      allowed.push_back(endpoint);
    else if (first_refusal.empty())
      first_refusal = verdict.reason;
  }
  if (allowed.empty()) return refuse(first_refusal);
  do_connect(std::move(allowed));
}

void EgressSession::do_connect(std::vector<tcp::endpoint> allowed) {
  if (!context_->take_connect_token(who_->account)) {
    const uint32_t rate = context_->limits().connect_rate;
    std::string why = fmt::format(
        "agentbox: this sandbox may open {} new connection{} a second through its proxy "
        "(connect_rate); wait a moment and retry",
        rate, rate == 1 ? "" : "s");
    record(false, why);
    return answer(http::status::too_many_requests, why, false, 1);
  }
  connect_to_ = std::move(allowed);
  connect_next_ = 0;
  upstream_deadline_.expires_after(context_->limits().connect_timeout);
  do_connect_next();
}

// One address after another, as asio's range connect would, but each on a socket opened and
// bounded before its SYN (the range connect reopens the socket per address, dropping options).
void EgressSession::do_connect_next() {
  const tcp::endpoint to = connect_to_[connect_next_++];
  error_code ec;
  upstream_.close(ec);
  upstream_.open(to.protocol(), ec);
  if (!ec) {
    try {
      bound_socket_buffers(upstream_.native_handle(), context_->limits().socket_buffer);
    } catch (const std::exception&) {
      ec = asio::error::no_buffer_space;
    }
  }
  if (ec) return on_connect(ec, to);
  upstream_.async_connect(to, [self = shared_from_this(), to](error_code ec) {
    if (ec && !self->upstream_deadline_.expired() && self->connect_next_ < self->connect_to_.size())
      return self->do_connect_next();
    self->on_connect(ec, to);
  });
}

void EgressSession::on_connect(error_code ec, tcp::endpoint to) {
  if (timed_out(ec, upstream_deadline_)) {
    std::string why =
        "agentbox: " + target_.authority() + " did not answer within " + seconds(context_->limits().connect_timeout);
    record(true, allowed_by_ + "; " + why.substr(10));
    return answer(http::status::gateway_timeout, why);
  }
  if (ec) {
    std::string why = "agentbox: cannot connect to " + target_.authority() + " (" + ec.message() + ")";
    record(true, allowed_by_ + "; " + why.substr(10));
    return answer(http::status::bad_gateway, why);
  }
  upstream_deadline_.expires_never();
  error_code ignored;
  upstream_.set_option(tcp::no_delay(true), ignored);
  connected_to_ = to.address().to_string();
  if (target_.kind == ProxyRequest::Kind::tunnel) return do_tunnel();
  upstream_host_ = target_.host;
  upstream_port_ = target_.port;
  upstream_address_ = connected_to_;
  upstream_config_ = config_;
  do_forward();
}

void EgressSession::do_forward() {
  // The proxy answers Expect: 100-continue itself: the origin gets the body without waiting.
  auto& req = request_->get();
  if (auto expect = req.find(http::field::expect);
      expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
    req.erase(http::field::expect);
    return asio::async_write(client_, asio::buffer(kContinue), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->do_send_request();
    });
  }
  do_send_request();
}

void EgressSession::do_tunnel() {
  // Bytes the client sent past its head (a TLS hello, eagerly) go first, then the relay.
  asio::async_write(client_, asio::buffer(kTunnelEstablished), [self = shared_from_this()](error_code ec, size_t) {
    if (ec) return self->close();
    self->bytes_up_ = self->client_buffer_.size();
    asio::async_write(self->upstream_, self->client_buffer_.data(), [self](error_code ec, size_t) {
      if (ec) return self->close();
      // The session lives as long as the tunnel (its log line): it keeps no buffer meanwhile.
      self->client_buffer_.clear();
      self->client_buffer_.shrink_to_fit();
      self->request_.reset();
      // The relay times the tunnel; the session's timers would only wake once for nothing.
      self->client_deadline_.cancel();
      self->upstream_deadline_.cancel();
      const size_t bound = self->context_->limits().socket_buffer;
      SpliceRelay::Options options{.idle_timeout = self->context_->limits().tunnel_idle_timeout,
                                   .pipe_size = bound ? bound : size_t{1} << 20};
      try {
        SpliceRelay::start(std::move(self->client_), std::move(self->upstream_), options,
                           [self](const SpliceRelay::Result& r) {
                             self->record(true, self->allowed_by_, self->bytes_up_ + r.a_to_b, r.b_to_a);
                           });
      } catch (const std::exception& e) {
        self->record(true, self->allowed_by_ + "; tunnel failed: " + e.what());
      }
    });
  });
}

void EgressSession::do_send_request() {
  auto& req = request_->get();
  remove_hop_by_hop(req);
  req.target(target_.target);
  if (req.find(http::field::host) == req.end())
    req.set(http::field::host, target_.port == 80 ? target_.host : target_.authority());
  // HTTP/1.1 keeps the origin's connection by default; one that cannot be followed by another
  // request (the client's closes, or HTTP/1.0) asks the origin to close.
  if (!client_keep_alive_ || req.version() < 11) req.set(http::field::connection, "close");
  request_out_.emplace(req);
  do_relay_request();
}

// The idle timeout is the time with no byte moving: each read and each write moves its side's
// deadline (net/body_relay.hpp).
void EgressSession::do_relay_request() {
  auto watch = [this, idle = context_->limits().idle_timeout](RelayStep step, std::string_view) {
    (step == RelayStep::read ? client_deadline_ : upstream_deadline_).expires_after(idle);
  };
  async_relay_message(client_, client_buffer_, *request_, upstream_, *request_out_, {.buffer = body_buffer()}, watch,
                      [self = shared_from_this()](RelayEnd end) {
                        self->bytes_up_ += end.bytes;
                        if (!end.ec) return self->on_request_sent();
                        if (end.failed == RelayStep::read) return self->close();
                        if (self->retried_on_new_connection(end.ec)) return;
                        self->answer(http::status::bad_gateway, "agentbox: " + self->target_.authority() +
                                                                    " stopped taking the request (" + end.ec.message() +
                                                                    ")");
                      });
}

void EgressSession::on_request_sent() { do_read_response_head(); }

void EgressSession::do_read_response_head() {
  response_.emplace();
  response_->body_limit(boost::none);
  if (request_->get().method() == http::verb::head) response_->skip(true);
  upstream_deadline_.expires_after(context_->limits().idle_timeout);
  http::async_read_header(upstream_, upstream_buffer_, *response_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_response_head(ec); });
}

void EgressSession::on_response_head(error_code ec) {
  if (timed_out(ec, upstream_deadline_)) {
    record(true, allowed_by_ + "; no answer");
    return answer(http::status::gateway_timeout, "agentbox: " + target_.authority() + " did not answer within " +
                                                     seconds(context_->limits().idle_timeout));
  }
  if (ec && retried_on_new_connection(ec)) return;
  if (ec) {
    record(true, allowed_by_ + "; bad answer: " + ec.message());
    return answer(http::status::bad_gateway,
                  "agentbox: " + target_.authority() + " gave no valid answer (" + ec.message() + ")");
  }
  auto& res = response_->get();
  if (res.result_int() / 100 == 1) return do_read_response_head();  // interim answers are the origin's
  // Read before the hop-by-hop fields go: Connection: close is one of them.
  upstream_kept_ = client_keep_alive_ && res.keep_alive() && !response_->need_eof();
  remove_hop_by_hop(res);
  // A body that ends with the connection cannot be followed by another request.
  client_keep_alive_ = client_keep_alive_ && !response_->need_eof();
  res.keep_alive(client_keep_alive_);
  response_out_.emplace(res);
  do_relay_response();
}

void EgressSession::do_relay_response() {
  auto watch = [this, idle = context_->limits().idle_timeout](RelayStep step, std::string_view) {
    (step == RelayStep::read ? upstream_deadline_ : client_deadline_).expires_after(idle);
  };
  async_relay_message(upstream_, upstream_buffer_, *response_, client_, *response_out_, {.buffer = body_buffer()},
                      watch, [self = shared_from_this()](RelayEnd end) {
                        self->bytes_down_ += end.bytes;
                        if (!end.ec) return self->on_response_sent();
                        // The head is out: all that can be done is to cut the connection.
                        self->record(true,
                                     self->allowed_by_ + (end.failed == RelayStep::write
                                                              ? "; the client left"
                                                              : "; the answer broke off: " + end.ec.message()),
                                     self->bytes_up_, self->bytes_down_);
                        self->close();
                      });
}

void EgressSession::on_response_sent() {
  record(true, allowed_by_, bytes_up_, bytes_down_);
  // Bytes past the answer were never asked for: such a connection is not used again.
  if (!upstream_kept_ || upstream_buffer_.size() != 0) drop_upstream();
  upstream_deadline_.expires_never();  // a kept connection waits for the next request untimed
  response_.reset();
  response_out_.reset();
  request_out_.reset();
  if (!client_keep_alive_) return close();
  do_read_head();
}

void EgressSession::answer(http::status status, const std::string& text, bool keep_alive, int retry_after_seconds) {
  auto res = std::make_shared<http::response<http::string_body>>(status, 11);
  res->set(http::field::content_type, "text/plain; charset=utf-8");
  res->set(http::field::server, "agentbox");
  if (retry_after_seconds > 0) res->set(http::field::retry_after, std::to_string(retry_after_seconds));
  res->body() = text + "\n";
  res->keep_alive(keep_alive);
  res->prepare_payload();
  client_deadline_.expires_after(context_->limits().header_timeout);
  http::async_write(client_, *res, [self = shared_from_this(), res, keep_alive](error_code ec, size_t) {
    if (ec || !keep_alive) return self->close();
    self->do_read_head();
  });
}

void EgressSession::refuse(const std::string& reason) {
  record(false, reason);
  answer(http::status::forbidden, reason);
}

void EgressSession::record(bool allowed, std::string reason, uint64_t up, uint64_t down) {
  NetworkDecision d;
  d.ts_ms = now_unix_ms();
  d.account = who_->account;
  d.kind = target_.kind == ProxyRequest::Kind::tunnel ? "tunnel" : "forward";
  d.host = target_.host;
  d.port = target_.port;
  d.address = connected_to_;
  d.allowed = allowed;
  d.reason = std::move(reason);
  d.bytes_up = static_cast<int64_t>(up);
  d.bytes_down = static_cast<int64_t>(down);
  metrics::Events& m = metrics::events();
  metrics::add(allowed ? m.egress_allowed : m.egress_denied);
  metrics::add(m.egress_bytes_up, up);
  metrics::add(m.egress_bytes_down, down);
  audit::net_decision({d.ts_ms, false, d.kind, d.account, who_->user, d.host, static_cast<std::uint16_t>(d.port),
                       d.address, allowed, d.reason, up, down});
  context_->record(std::move(d));
}

void EgressSession::close() {
  release_slot();
  client_deadline_.cancel();
  upstream_deadline_.cancel();
  error_code ignored;
  client_.shutdown(tcp::socket::shutdown_send, ignored);
  client_.close(ignored);
  upstream_.close(ignored);
}

}  // namespace agentbox::net
