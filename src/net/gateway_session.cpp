#include "net/gateway_session.hpp"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "audit/trail.hpp"
#include "metrics/events.hpp"
#include "net/body_relay.hpp"
#include "net/hop_by_hop.hpp"
#include "net/ip_address.hpp"
#include "store/box_key.hpp"

namespace agentbox::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::chrono::seconds kLinger{2};
// Claude's OAuth tokens are accepted only with this beta named; a box's client, which believes
// it holds an API key, does not name it.
constexpr std::string_view kOAuthBeta = "oauth-2025-04-20";

bool is_quiet_end(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::operation_aborted;
}

// Anthropic's error types, by the status the gateway answers with.
std::string_view error_type(http::status status) {
  switch (status) {
    case http::status::too_many_requests: return "rate_limit_error";
    case http::status::forbidden: return "permission_error";
    case http::status::payload_too_large: return "request_too_large";
    case http::status::bad_gateway:
    case http::status::gateway_timeout: return "api_error";
    default: return "invalid_request_error";
  }
}

std::string seconds(std::chrono::milliseconds ms) { return std::to_string((ms.count() + 999) / 1000) + " s"; }

}  // namespace

GatewaySession::GatewaySession(tcp::socket client, std::shared_ptr<BoxAccount> who,
                               std::shared_ptr<GatewayContext> context)
    : client_(std::move(client)),
      who_(std::move(who)),
      account_(account_of_box(who_->account)),
      context_(std::move(context)) {
  ++who_->open;
  // An answer's events go out as they come, not after the box's ACK of the last one.
  boost::system::error_code ignored;
  client_.socket().set_option(tcp::no_delay(true), ignored);
}

GatewaySession::~GatewaySession() {
  --who_->open;
  release_held();
}

void GatewaySession::start() {
  const size_t cap = context_->options().connections_per_account;
  if (who_->open > cap)
    return answer_error(http::status::too_many_requests,
                        fmt::format("agentbox: this sandbox may have {} connection{} open to its model gateway at once",
                                    cap, cap == 1 ? "" : "s"));
  do_read_head();
}

void GatewaySession::do_read_head() {
  body_held_ = false;
  request_.emplace();
  request_->header_limit(context_->options().header_limit);
  request_->body_limit(boost::none);  // bodies stream through (held whole only for a budget, within request_memory)
  bytes_up_ = bytes_down_ = 0;
  client_.expires_after(context_->options().header_timeout);
  http::async_read_header(client_, client_buffer_, *request_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_read_head(ec); });
}

void GatewaySession::on_read_head(error_code ec) {
  if (ec == beast::error::timeout || is_quiet_end(ec)) return close();
  if (ec == http::error::header_limit)
    return answer_error(
        http::status::request_header_fields_too_large,
        fmt::format("agentbox: the request head is larger than {} bytes", context_->options().header_limit));
  if (ec) return answer_error(http::status::bad_request, "agentbox: malformed request (" + ec.message() + ")");
  client_.expires_never();
  auto& req = request_->get();
  std::string_view target = req.target();
  what_ = fmt::format("{} {}", std::string_view(req.method_string()), target.substr(0, target.find('?')));
  if (!target.starts_with('/'))
    return answer_error(http::status::bad_request,
                        "agentbox: this is the model gateway (ANTHROPIC_BASE_URL), not a proxy: send a path such as "
                        "/v1/messages");
  RouteMatch match = match_gateway_route(std::string_view(req.method_string()), target);
  if (!match.route) {
    record(false, match.refusal.substr(10));
    // The request's body is still unread: the connection cannot carry another request.
    return answer_error(http::status::forbidden, match.refusal);
  }
  client_keep_alive_ = req.keep_alive();
  if (match.route->spends_tokens && context_->options().daily_tokens > 0 && context_->ledger())
    return start_held_body();
  prepare_request();
  // The gateway answers Expect: 100-continue itself: the upstream gets the body without waiting.
  if (auto expect = req.find(http::field::expect);
      expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
    req.erase(http::field::expect);
    return asio::async_write(client_, asio::buffer(kContinue), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->do_upstream();
    });
  }
  do_upstream();
}

void GatewaySession::start_held_body() {
  auto& req = request_->get();
  const size_t cap = context_->options().request_memory;
  if (auto length = request_->content_length(); length && *length > cap) {
    std::string why = fmt::format(
        "agentbox: a request body of {} bytes is more than the model gateway holds to check it against the token "
        "budget ([inference] request_memory = {} bytes)",
        *length, cap);
    record(false, what_ + ": " + why.substr(10));
    return answer_error(http::status::payload_too_large, why);
  }
  body_held_ = true;
  if (auto expect = req.find(http::field::expect);
      expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
    req.erase(http::field::expect);
    return asio::async_write(client_, asio::buffer(kContinue), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->do_read_held_body();
    });
  }
  do_read_held_body();
}

void GatewaySession::do_read_held_body() {
  if (request_->is_done()) {
    // Read off the loop, which serves every box; the session waits for nothing else meanwhile.
    client_.expires_never();
    return context_->scans().post(account_, [self = shared_from_this()] {
      WorstCaseScan scan = worst_case_tokens(self->held_, self->context_->options().context_tokens);
      asio::post(self->client_.get_executor(),
                 [self, scan = std::move(scan)]() mutable { self->on_scanned(std::move(scan)); });
    });
  }
  auto& body = request_->get().body();
  body.data = body_buffer_.data();
  body.size = body_buffer_.size();
  client_.expires_after(context_->options().idle_timeout);
  http::async_read_some(client_, client_buffer_, *request_,
                        [self = shared_from_this()](error_code ec, size_t) { self->on_held_body_read(ec); });
}

void GatewaySession::on_held_body_read(error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) return close();
  const size_t used = body_buffer_.size() - request_->get().body().size;
  if (used > 0) {
    const size_t cap = context_->options().request_memory;
    if (!context_->hold(account_, used)) {
      const bool alone = held_.size() + used > cap;
      std::string why =
          alone ? fmt::format(
                      "agentbox: a request body of more than {} bytes is more than the model gateway holds to "
                      "check it against the token budget ([inference] request_memory)",
                      cap)
                : fmt::format(
                      "agentbox: this sandbox's requests waiting for the token budget check may hold {} bytes "
                      "at once ([inference] request_memory); try again when one has gone",
                      cap);
      record(false, what_ + ": " + why.substr(10));
      release_held();
      return answer_error(alone ? http::status::payload_too_large : http::status::too_many_requests, why);
    }
    held_.append(body_buffer_.data(), used);
    bytes_up_ += used;
  }
  do_read_held_body();
}

void GatewaySession::on_scanned(WorstCaseScan scan) {
  if (!scan.worst) {
    record(false, what_ + ": " + scan.refusal.substr(10));
    release_held();
    return answer_error(http::status::bad_request, scan.refusal, client_keep_alive_);
  }
  const WorstCase& worst = *scan.worst;
  const uint64_t budget = context_->options().daily_tokens;
  uint64_t left = 0;
  std::optional<TokenReservation> reserved =
      context_->ledger()->reserve(account_, utc_today(), worst.total(), budget, left);
  if (!reserved) {
    std::string why = fmt::format(
        "agentbox: this request may spend up to {} tokens (max_tokens {} and {} of input, bounded by {}), more than "
        "is left of this account's daily token budget of {} tokens: {} left, counting requests in flight; it renews "
        "at 00:00 UTC",
        worst.total(), worst.output, worst.input, worst.input_bound, budget, left);
    record(false, what_ + ": " + why.substr(10));
    release_held();
    return answer_error(http::status::too_many_requests, why, client_keep_alive_);
  }
  reservation_ = std::move(reserved);
  prepare_request();
  request_->get().content_length(held_.size());  // the body goes up whole, in one piece
  do_upstream();
}

void GatewaySession::release_held() {
  context_->unhold(account_, held_.size());
  std::string().swap(held_);
}

void GatewaySession::prepare_request() {
  const GatewayOptions& o = context_->options();
  auto& req = request_->get();
  remove_hop_by_hop(req);
  // Whatever the box holds is not a credential: the operator's replaces it.
  req.erase(http::field::authorization);
  req.erase("x-api-key");
  if (o.credential.kind == Credential::Kind::api_key) {
    req.set("x-api-key", o.credential.secret);
  } else {
    req.set(http::field::authorization, "Bearer " + o.credential.secret);
    std::string betas(req["anthropic-beta"]);
    if (betas.find(kOAuthBeta) == std::string::npos)
      req.set("anthropic-beta", betas.empty() ? std::string(kOAuthBeta) : betas + "," + std::string(kOAuthBeta));
  }
  // The answer is read for its token counts: uncompressed.
  req.set(http::field::accept_encoding, "identity");
  req.set(http::field::host, o.upstream.authority());
  req.target(o.upstream.base_path + std::string(req.target()));
  req.keep_alive(true);
}

template <class F>
void GatewaySession::with_upstream(F&& f) {
  if (tls_)
    f(*tls_);
  else
    f(*plain_);
}

beast::tcp_stream& GatewaySession::upstream_tcp() { return tls_ ? beast::get_lowest_layer(*tls_) : *plain_; }

// An idle upstream connection is good while nothing is waiting on it: a peer that closed it
// (EOF) or sent anything unasked (a TLS alert) has ended it.
bool GatewaySession::upstream_reusable() {
  if (!tls_ && !plain_) return false;
  if (!upstream_keep_alive_ || !upstream_tcp().socket().is_open()) return false;
  char byte;
  ssize_t n = ::recv(upstream_tcp().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void GatewaySession::drop_upstream() {
  error_code ignored;
  if (tls_ || plain_) upstream_tcp().socket().close(ignored);
  tls_.reset();
  plain_.reset();
  upstream_buffer_.clear();
  upstream_keep_alive_ = false;
}

void GatewaySession::do_upstream() {
  if (upstream_reusable()) return do_send_request();
  drop_upstream();
  const GatewayOptions& o = context_->options();
  if (o.upstream.tls) {
    tls_.emplace(client_.get_executor(), context_->tls());
    SSL* ssl = tls_->native_handle();
    // SNI and the name the certificate must carry; an IP literal is checked as an address.
    if (IpAddress::parse(o.upstream.host)) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), o.upstream.host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, o.upstream.host.c_str());
      SSL_set1_host(ssl, o.upstream.host.c_str());
    }
  } else {
    plain_.emplace(client_.get_executor());
  }
  upstream_tcp().expires_after(o.connect_timeout);
  context_->resolver().resolve(who_->account, o.upstream.host, o.upstream.port,
                               [self = shared_from_this()](error_code ec, std::vector<tcp::endpoint> found) {
                                 asio::post(self->client_.get_executor(), [self, ec, found = std::move(found)] {
                                   if (ec) return self->upstream_failed(ec, "cannot resolve");
                                   self->upstream_tcp().async_connect(found, [self](error_code ec, tcp::endpoint to) {
                                     if (!ec) self->connected_to_ = to.address().to_string();
                                     self->on_connected(ec);
                                   });
                                 });
                               });
}

void GatewaySession::on_connected(error_code ec) {
  if (ec) return upstream_failed(ec, "cannot connect to");
  error_code ignored;
  upstream_tcp().socket().set_option(tcp::no_delay(true), ignored);
  if (!tls_) {
    upstream_tcp().expires_never();
    return do_send_request();
  }
  tls_->async_handshake(ssl::stream_base::client, [self = shared_from_this()](error_code ec) {
    if (ec) return self->upstream_failed(ec, "TLS with");
    self->upstream_tcp().expires_never();
    self->do_send_request();
  });
}

void GatewaySession::do_send_request() {
  request_out_.emplace(request_->get());
  do_relay_request();
}

// The idle timeout is the time with no byte moving: each read and each write moves its side's
// deadline (net/body_relay.hpp). A body held for the budget check goes up whole, in one piece.
void GatewaySession::do_relay_request() {
  auto watch = [this, idle = context_->options().idle_timeout](RelayStep step, std::string_view) {
    if (step == RelayStep::read)
      client_.expires_after(idle);
    else
      upstream_tcp().expires_after(idle);
  };
  const RelayOptions options{.buffer = body_buffer_, .held = body_held_ ? std::string_view(held_) : std::string_view()};
  with_upstream([&](auto& upstream) {
    async_relay_message(client_, client_buffer_, *request_, upstream, *request_out_, options, watch,
                        [self = shared_from_this()](RelayEnd end) {
                          if (!self->body_held_)
                            self->bytes_up_ += end.bytes;  // a held body was counted as it was read
                          if (end.ec && end.failed == RelayStep::read) return self->close();
                          if (end.ec) return self->upstream_failed(end.ec, "lost the request to");
                          self->do_read_response_head();
                        });
  });
}

void GatewaySession::do_read_response_head() {
  if (body_held_) release_held();  // sent
  response_.emplace();
  response_->body_limit(boost::none);
  if (request_->get().method() == http::verb::head) response_->skip(true);
  upstream_tcp().expires_after(context_->options().idle_timeout);
  with_upstream([&](auto& upstream) {
    http::async_read_header(upstream, upstream_buffer_, *response_,
                            [self = shared_from_this()](error_code ec, size_t) { self->on_response_head(ec); });
  });
}

void GatewaySession::on_response_head(error_code ec) {
  if (ec) return upstream_failed(ec, "no answer from");
  auto& res = response_->get();
  if (res.result_int() / 100 == 1) return do_read_response_head();  // interim answers are the upstream's
  remove_hop_by_hop(res);
  upstream_keep_alive_ = res.keep_alive() && !response_->need_eof();
  client_keep_alive_ = client_keep_alive_ && !response_->need_eof();
  res.keep_alive(client_keep_alive_);
  meter_.emplace(res[http::field::content_type]);
  response_out_.emplace(res);
  do_relay_response();
}

// The answer streams to the box event by event, read for its token counts as it passes.
void GatewaySession::do_relay_response() {
  auto watch = [this, idle = context_->options().idle_timeout](RelayStep step, std::string_view piece) {
    if (step == RelayStep::read) return upstream_tcp().expires_after(idle);
    client_.expires_after(idle);
    meter_->feed(piece);
  };
  const RelayOptions options{.buffer = body_buffer_};
  with_upstream([&](auto& upstream) {
    async_relay_message(upstream, upstream_buffer_, *response_, client_, *response_out_, options, watch,
                        [self = shared_from_this()](RelayEnd end) {
                          self->bytes_down_ += end.bytes;
                          if (!end.ec) return self->on_response_sent();
                          // The box went away mid-answer (an interrupted run), or the head is out and all that can
                          // be done is to cut the connection: what streamed so far still counts.
                          self->count(self->meter_->finish());
                          self->record(true, self->what_ + (end.failed == RelayStep::write
                                                                ? ": the client left"
                                                                : ": the answer broke off: " + end.ec.message()));
                          self->close();
                        });
  });
}

void GatewaySession::on_response_sent() {
  TokenCounts used = meter_->finish();
  const unsigned status = response_->get().result_int();
  if (status >= 100 && status < 600) metrics::add(metrics::events().gateway_upstream_status[status / 100 - 1]);
  if (status / 100 == 2 || used.total() > 0) count(used);
  reservation_.reset();  // an answer that used nothing (an error): released
  record(true, fmt::format("{} -> {}, {} tokens", what_, status, used.total()));
  if (!upstream_keep_alive_) drop_upstream();
  response_.reset();
  response_out_.reset();
  request_out_.reset();
  meter_.reset();
  if (!client_keep_alive_) return close();
  do_read_head();
}

void GatewaySession::upstream_failed(error_code ec, const std::string& doing) {
  const GatewayOptions& o = context_->options();
  std::string why =
      ec == beast::error::timeout
          ? fmt::format("agentbox: the model upstream {} did not answer within {}", o.upstream.authority(),
                        seconds(request_out_ ? o.idle_timeout : o.connect_timeout))
          : fmt::format("agentbox: {} the model upstream {} ({})", doing, o.upstream.authority(), ec.message());
  record(true, why.substr(10));
  drop_upstream();
  if (!response_out_) reservation_.reset();  // no answer: nothing to count
  // A reply is possible only while nothing of the answer has gone to the box.
  if (response_out_) return close();
  answer_error(ec == beast::error::timeout ? http::status::gateway_timeout : http::status::bad_gateway, why);
}

void GatewaySession::answer_error(http::status status, const std::string& message, bool keep_alive) {
  auto res = std::make_shared<http::response<http::string_body>>(status, 11);
  res->set(http::field::content_type, "application/json");
  res->set(http::field::server, "agentbox");
  res->body() =
      nlohmann::json{{"type", "error"}, {"error", {{"type", error_type(status)}, {"message", message}}}}.dump();
  res->keep_alive(keep_alive);
  res->prepare_payload();
  client_.expires_after(context_->options().header_timeout);
  http::async_write(client_, *res, [self = shared_from_this(), res, keep_alive](error_code ec, size_t) {
    if (ec) return self->close();
    if (!keep_alive) return self->linger();
    self->do_read_head();
  });
}

// An answer given before the request's body was read: closing at once would reset the
// connection while the box still sends, and the box would lose the answer. What it sends is
// read and dropped until it closes too, for kLinger at most.
void GatewaySession::linger() {
  error_code ignored;
  client_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  client_.expires_after(kLinger);
  do_drain();
}

void GatewaySession::do_drain() {
  client_.async_read_some(asio::buffer(body_buffer_), [self = shared_from_this()](error_code ec, size_t) {
    if (ec) return self->close();
    self->do_drain();
  });
}

void GatewaySession::record(bool allowed, std::string reason) {
  const GatewayOptions& o = context_->options();
  NetworkDecision d;
  d.ts_ms = now_unix_ms();
  d.account = who_->account;
  d.kind = "gateway";
  d.host = o.upstream.host;
  d.port = o.upstream.port;
  d.address = connected_to_;
  d.allowed = allowed;
  d.reason = std::move(reason);
  d.bytes_up = static_cast<int64_t>(bytes_up_);
  d.bytes_down = static_cast<int64_t>(bytes_down_);
  metrics::add(allowed ? metrics::events().gateway_allowed : metrics::events().gateway_denied);
  audit::net_decision({d.ts_ms, true, d.kind, d.account, who_->user, d.host, static_cast<std::uint16_t>(d.port),
                       d.address, allowed, d.reason, bytes_up_, bytes_down_});
  context_->record(std::move(d));
}

void GatewaySession::count(const TokenCounts& used) {
  metrics::Events& m = metrics::events();
  metrics::add(m.gateway_tokens[0], used.input_tokens);
  metrics::add(m.gateway_tokens[1], used.output_tokens);
  metrics::add(m.gateway_tokens[2], used.cache_creation_input_tokens);
  metrics::add(m.gateway_tokens[3], used.cache_read_input_tokens);
  if (reservation_) {
    reservation_->settle(used);
    reservation_.reset();
  } else if (context_->ledger()) {
    context_->ledger()->add(account_, utc_today(), used);
  }
}

void GatewaySession::close() {
  error_code ignored;
  client_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  client_.socket().close(ignored);
  drop_upstream();
}

}  // namespace agentbox::net
