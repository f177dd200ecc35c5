#include "server/terminal_socket.hpp"

#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "server/access_log.hpp"
#include "server/http_error.hpp"
#include "server/takeover_response.hpp"

namespace agentbox::server {

namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;

// Close codes of Open Terminal's protocol, and the standard ones we use.
constexpr std::uint16_t kCloseEnded = 1000;      // the terminal ended (the reason says how)
constexpr std::uint16_t kCloseInternal = 1011;   // the daemon could not serve it
constexpr std::uint16_t kCloseBadAuth = 4001;    // no auth frame in time, or a wrong key
constexpr std::uint16_t kCloseNotFound = 4004;   // no such terminal of this user (or it ended)
constexpr std::size_t kMaxCloseReason = 123;     // RFC 6455: a close frame's payload is at most 125 bytes
constexpr std::size_t kWriteBatch = 64 * 1024;   // output queued meanwhile goes out as one frame
constexpr std::chrono::seconds kHandshakeTimeout{10};

}  // namespace

void TerminalSocket::serve(Takeover takeover, std::shared_ptr<const TerminalSocketContext> ctx) {
  // Turned down before the upgrade, as HTTP: a client without a user is an error in the
  // request (API.md: 400), not something a WebSocket close should hide.
  try {
    user_id_of(takeover.request, /*query_allowed=*/true);
  } catch (const HttpError& e) {
    return respond_and_close(std::move(takeover), error_response(e.status(), e.detail()));
  }
  // A client must wait for the handshake's answer before it sends frames (RFC 6455 4.1).
  if (takeover.buffer.size() > 0)
    return respond_and_close(std::move(takeover),
                             error_response(http::status::bad_request, "Data sent before the WebSocket handshake"));
  std::make_shared<TerminalSocket>(std::move(takeover), std::move(ctx))->do_accept();
}

TerminalSocket::TerminalSocket(Takeover takeover, std::shared_ptr<const TerminalSocketContext> ctx)
    : ctx_(std::move(ctx)),
      request_(std::move(takeover.request)),
      terminal_id_(request_.param("id")),
      ws_(std::move(takeover.socket)),
      auth_timer_(ws_.get_executor()),
      parser_(std::move(takeover.parser)),
      authenticated_(takeover.key_accepted) {}

TerminalSocket::~TerminalSocket() {
  if (client_) client_->detach();
}

// ---------------------------------------------------------------- handshake and auth

void TerminalSocket::do_accept() {
  websocket::stream_base::timeout timeouts{};
  timeouts.handshake_timeout = kHandshakeTimeout;  // the opening and the closing handshake
  timeouts.idle_timeout = ctx_->options.idle_timeout;
  timeouts.keep_alive_pings = true;                // a ping at half of it; a live client answers
  ws_.set_option(timeouts);
  ws_.read_message_max(ctx_->options.max_message_bytes);
  ws_.auto_fragment(false);
  beast::get_lowest_layer(ws_).expires_never();  // the websocket's own timeouts apply from here
  ws_.async_accept(parser_->get(), [self = shared_from_this()](error_code ec) { self->on_accept(ec); });
}

void TerminalSocket::on_accept(error_code ec) {
  parser_.reset();
  if (ec) return tear_down();
  if (authenticated_) {
    attach();
  } else {
    do_auth_deadline();
  }
  if (!closing_) do_read();
}

void TerminalSocket::do_auth_deadline() {
  auth_timer_.expires_after(ctx_->options.auth_timeout);
  auth_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->authenticated_) return;
    self->do_close(kCloseBadAuth, "Auth timeout or invalid payload");
  });
}

void TerminalSocket::on_auth_frame(const std::string& text) {
  auto msg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const bool is_auth = msg.is_object() && msg.value("type", nlohmann::json()) == "auth";
  const auto token = is_auth ? msg.find("token") : msg.end();
  if (!is_auth || token == msg.end() || !token->is_string() ||
      !ctx_->auth.accepts("Bearer " + token->get<std::string>()))
    return do_close(kCloseBadAuth, is_auth ? "Invalid API key" : "Auth timeout or invalid payload");
  authenticated_ = true;
  auth_timer_.cancel();
  attach();
}

// Only after authentication: an unauthenticated client may neither create an account nor
// learn whether a terminal exists.
void TerminalSocket::attach() {
  std::string account;
  try {
    account = ctx_->callers.resolve(request_, /*query_user_allowed=*/true).account.name;
  } catch (const HttpError& e) {
    return do_close(kCloseNotFound, std::string(e.detail()));
  } catch (const std::exception& e) {
    http_logger()->error("WS /api/terminals/{}: {}", terminal_id_, e.what());
    return do_close(kCloseInternal, "Internal Server Error");
  }
  std::weak_ptr<TerminalSocket> weak = weak_from_this();
  exec::TerminalSink sink;
  sink.output = [weak](std::string_view bytes) {
    if (auto self = weak.lock()) self->post_output(bytes);
  };
  sink.ended = [weak](const std::string& why) {
    if (auto self = weak.lock()) self->post_ended(why);
  };
  client_ = ctx_->terminals.attach(account, terminal_id_, std::move(sink));
  if (!client_) return do_close(kCloseNotFound, "Session not found");
  http_logger()->info("{} WS /api/terminals/{} attached ({})", request_.remote_address, terminal_id_, account);
}

// ---------------------------------------------------------------- reading

void TerminalSocket::do_read() {
  if (reading_ || gone_) return;
  reading_ = true;
  ws_.async_read(read_buffer_, [self = shared_from_this()](error_code ec, std::size_t n) { self->on_read(ec, n); });
}

void TerminalSocket::on_read(error_code ec, std::size_t) {
  reading_ = false;
  if (ec) return tear_down();  // closed by the peer, too big (Beast sent 1009), idle, or dropped
  std::string data = beast::buffers_to_string(read_buffer_.data());
  read_buffer_.consume(read_buffer_.size());
  if (closing_) return;  // the close handshake reads the rest itself
  if (ws_.got_text()) {
    if (!authenticated_) {
      on_auth_frame(data);
    } else {
      on_text(std::move(data));
    }
  } else if (!authenticated_) {
    return do_close(kCloseBadAuth, "Auth timeout or invalid payload");
  } else {
    on_keystrokes(std::move(data));
  }
  // Keystrokes the shell has not taken yet stay in the client's socket, not in our memory.
  if (!closing_ && input_in_flight_ < ctx_->options.max_input_in_flight) do_read();
}

// A JSON object with a "type" is a control message: a resize is applied, others (a repeated
// auth frame, a client's own ping) are ignored. Any other text is keystrokes, as a binary
// frame would be (clients that send text frames from xterm.js's onData).
void TerminalSocket::on_text(std::string text) {
  auto msg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!msg.is_object() || !msg.contains("type")) return on_keystrokes(std::move(text));
  if (msg["type"] != "resize" || !client_) return;
  auto dimension = [&](const char* key) -> std::uint16_t {
    auto it = msg.find(key);
    if (it == msg.end() || !it->is_number_integer()) return 0;
    const auto v = it->get<std::int64_t>();
    return v >= 1 && v <= 0xFFFF ? static_cast<std::uint16_t>(v) : 0;
  };
  client_->resize(dimension("cols"), dimension("rows"));  // 0 in either: ignored
}

void TerminalSocket::on_keystrokes(std::string data) {
  if (!client_ || data.empty()) return;
  const std::size_t n = data.size();
  input_in_flight_ += n;
  std::weak_ptr<TerminalSocket> weak = weak_from_this();
  client_->input(std::move(data), [weak, n] {
    if (auto self = weak.lock()) net::post(self->ws_.get_executor(), [self, n] { self->on_input_taken(n); });
  });
}

void TerminalSocket::on_input_taken(std::size_t bytes) {
  input_in_flight_ -= std::min(bytes, input_in_flight_);
  if (!closing_ && input_in_flight_ < ctx_->options.max_input_in_flight) do_read();
}

// ---------------------------------------------------------------- writing

void TerminalSocket::post_output(std::string_view bytes) {
  if (overflowed_.load()) return;
  if (queued_bytes_.fetch_add(bytes.size()) + bytes.size() > ctx_->options.max_queued_bytes) {
    overflowed_ = true;
    net::post(ws_.get_executor(), [self = shared_from_this()] {
      http_logger()->warn("{} WS /api/terminals/{}: client too slow, {} bytes of output waiting; dropped",
                          self->request_.remote_address, self->terminal_id_, self->queued_bytes_.load());
      self->drop();
    });
    return;
  }
  // defer: the terminal's output continues on this io thread once the pty read returns, rather
  // than waking another thread for the write (the keystroke round trip, bench/RESULTS.md).
  net::defer(ws_.get_executor(), [self = shared_from_this(), data = std::string(bytes)]() mutable {
    self->queue_output(std::move(data));
  });
}

void TerminalSocket::post_ended(const std::string& why) {
  net::post(ws_.get_executor(), [self = shared_from_this(), why] { self->do_close(kCloseEnded, why); });
}

void TerminalSocket::queue_output(std::string bytes) {
  if (gone_ || close_sent_) {
    queued_bytes_ -= bytes.size();
    return;
  }
  outbox_.push_back(std::move(bytes));
  if (!writing_) do_write();
}

void TerminalSocket::do_write() {
  if (outbox_.empty() || gone_) return;
  std::string& frame = outbox_.front();
  while (outbox_.size() > 1 && frame.size() < kWriteBatch) {
    frame += outbox_[1];
    outbox_.erase(outbox_.begin() + 1);
  }
  writing_ = true;
  ws_.binary(true);
  ws_.async_write(net::buffer(frame), [self = shared_from_this()](error_code ec, std::size_t n) { self->on_write(ec, n); });
}

void TerminalSocket::on_write(error_code ec, std::size_t) {
  writing_ = false;
  queued_bytes_ -= outbox_.front().size();
  outbox_.pop_front();
  if (ec) return tear_down();
  if (!outbox_.empty()) return do_write();
  send_close();
}

// ---------------------------------------------------------------- closing

void TerminalSocket::do_close(std::uint16_t code, std::string reason) {
  if (gone_ || closing_) return;
  closing_ = true;
  close_code_ = code;
  close_reason_ = std::move(reason);
  if (close_reason_.size() > kMaxCloseReason) close_reason_.resize(kMaxCloseReason);
  auth_timer_.cancel();
  if (client_) {
    client_->detach();
    client_.reset();
  }
  send_close();
}

// Once the output already queued is out (a shell's last words before "exited").
void TerminalSocket::send_close() {
  if (!closing_ || close_sent_ || gone_ || writing_ || !outbox_.empty()) return;
  close_sent_ = true;
  http_logger()->info("{} WS /api/terminals/{} closed: {} {}", request_.remote_address, terminal_id_,
                      close_code_, close_reason_);
  websocket::close_reason why(close_code_);  // Open Terminal's 4001/4004 are not close_code values
  why.reason = close_reason_;
  ws_.async_close(why,
                  [self = shared_from_this()](error_code ec) { self->on_close(ec); });
}

void TerminalSocket::on_close(error_code) { tear_down(); }

void TerminalSocket::drop() {
  error_code ignored;
  beast::get_lowest_layer(ws_).socket().close(ignored);  // what is pending fails and tears down
  tear_down();
}

void TerminalSocket::tear_down() {
  if (gone_) return;
  gone_ = true;
  auth_timer_.cancel();
  if (client_) {
    client_->detach();
    client_.reset();
  }
  // The frame being written stays until its write completes (Beast still reads it).
  while (outbox_.size() > (writing_ ? 1u : 0u)) {
    queued_bytes_ -= outbox_.back().size();
    outbox_.pop_back();
  }
}

}  // namespace agentbox::server
