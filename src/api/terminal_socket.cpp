#include "api/terminal_socket.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "api/profiles.hpp"
#include "http/authorize.hpp"
#include "http/error.hpp"
#include "http/takeover_response.hpp"
#include "util/log.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
using Clock = TerminalLoop::Clock;

// Close codes of Open Terminal's protocol, and the standard ones we use.
constexpr std::uint16_t kCloseEnded = 1000;            // the terminal ended (the reason says how)
constexpr std::uint16_t kCloseInternal = 1011;         // the daemon could not serve it
constexpr std::uint16_t kCloseTryAgain = 1013;         // its place went to a new connection (RFC 6455 7.4.1)
constexpr std::uint16_t kCloseBadAuth = 4001;          // no auth frame in time, or a wrong key
constexpr std::uint16_t kCloseForbidden = 4003;        // a user's key, and the request names someone else or
                                                       // a profile that is not open to that user
constexpr std::uint16_t kCloseNotFound = 4004;         // no such terminal of this user (or it ended)
constexpr std::chrono::seconds kHandshakeTimeout{10};  // the opening and the closing handshake

// Whether the request names a user itself (accounts/user_id.hpp's sources).
bool names_user(const Request& req) {
  return req.headers.count("X-User-Id") || req.headers.count("X-OpenWebUI-User-Id") ||
         !req.query_params("user_id").empty();
}

// The upgrade, answered by Beast on the API's io thread; the socket then goes to the loop.
class Upgrade : public std::enable_shared_from_this<Upgrade> {
 public:
  Upgrade(Takeover takeover, std::shared_ptr<const TerminalSocketContext> ctx)
      : ctx_(std::move(ctx)),
        request_(std::move(takeover.request)),
        authenticated_(takeover.key_accepted),
        slot_(std::move(takeover.slot)),
        report_(std::move(takeover.report)),
        ws_(std::move(takeover.socket)),
        parser_(std::move(takeover.parser)) {}

  void run() {
    websocket::stream_base::timeout timeouts{};
    timeouts.handshake_timeout = kHandshakeTimeout;
    timeouts.idle_timeout = websocket::stream_base::none();
    ws_.set_option(timeouts);
    beast::get_lowest_layer(ws_).expires_never();
    ws_.async_accept(parser_->get(), [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

 private:
  void on_accept(beast::error_code ec) {
    if (ec) return report_(400);       // Beast turned the upgrade down, or the client left mid-handshake
    if (authenticated_) report_(101);  // the upgrade's key; else the auth frame decides
    UniqueFd fd(beast::get_lowest_layer(ws_).release_socket().release(ec));
    if (ec || !fd || ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK) != 0) return;
    TerminalLoop& loop = ctx_->terminals.loop();
    // std::function wants a copyable task: the socket, the request and the connection's place
    // travel in one shared_ptr.
    struct Moved {
      UniqueFd fd;
      Request request;
      ConnectionSlot slot;
      TakeoverReport report;
    };
    auto moved =
        std::make_shared<Moved>(Moved{std::move(fd), std::move(request_), std::move(slot_), std::move(report_)});
    loop.post([moved, authenticated = authenticated_, ctx = ctx_]() mutable {
      std::make_shared<TerminalSocket>(std::move(moved->fd), std::move(moved->request), authenticated, std::move(ctx),
                                       std::move(moved->slot), std::move(moved->report))
          ->start();
    });
  }

  std::shared_ptr<const TerminalSocketContext> ctx_;
  Request request_;
  bool authenticated_;
  ConnectionSlot slot_;
  TakeoverReport report_;
  websocket::stream<beast::tcp_stream> ws_;
  std::unique_ptr<Takeover::Parser> parser_;  // holds the upgrade request async_accept answers
};

}  // namespace

void TerminalSocket::serve(Takeover takeover, std::shared_ptr<const TerminalSocketContext> ctx) {
  // Turned down before the upgrade, as HTTP: a client without a user is an error in the
  // request (API.md: 400), not something a WebSocket close should hide.
  // A client that names no user and has not authenticated yet may be a browser with a user's
  // key: its auth frame will name the user.
  try {
    if (names_user(takeover.request) || takeover.key_accepted)
      accounts::user_id_of(takeover.request, /*query_allowed=*/true);
  } catch (const HttpError& e) {
    return respond_and_close(std::move(takeover), error_response(e.status(), e.detail()));
  }
  // A client must wait for the handshake's answer before it sends frames (RFC 6455 4.1).
  if (takeover.buffer.size() > 0)
    return respond_and_close(std::move(takeover),
                             error_response(http::status::bad_request, "Data sent before the WebSocket handshake"));
  std::make_shared<Upgrade>(std::move(takeover), std::move(ctx))->run();
}

TerminalSocket::TerminalSocket(UniqueFd fd, Request request, bool authenticated,
                               std::shared_ptr<const TerminalSocketContext> ctx, ConnectionSlot slot,
                               TakeoverReport report)
    : ctx_(std::move(ctx)),
      loop_(ctx_->terminals.loop()),
      slot_(std::move(slot)),
      request_(std::move(request)),
      report_(std::move(report)),
      terminal_id_(request_.param("id")),
      fd_(std::move(fd)),
      frames_(
          [this](uint8_t* buf, std::size_t len) -> long {
            // Level-triggered: once a read came up short the socket is empty; the next one
            // would only answer EAGAIN. Held back, too, while the shell has not taken its input.
            if (drained_ || input_held()) return -1;
            const ssize_t n = ::recv(fd_.get(), buf, len, 0);
            if (n > 0) {
              drained_ = static_cast<std::size_t>(n) < len;
              return n;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return -1;
            return n == 0 ? 0 : -2;
          },
          [this](std::string_view head, std::string_view payload) -> long {
            iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                            {const_cast<char*>(payload.data()), payload.size()}};
            msghdr msg{};
            msg.msg_iov = head.empty() ? iov + 1 : iov;
            msg.msg_iovlen = head.empty() ? 1 : 2;
            const ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
            if (n >= 0) return n;
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
          },
          [this](bool text, std::string_view payload) { on_message(text, payload); }, ctx_->options.max_message_bytes),
      last_read_(Clock::now()),
      authenticated_(authenticated) {}

TerminalSocket::~TerminalSocket() {
  if (client_) client_->detach();
}

void TerminalSocket::start() {
  interest_ = EPOLLIN;
  watch_ = loop().watch(fd_.get(), interest_, [self = shared_from_this()](uint32_t events) { self->on_ready(events); });
  std::weak_ptr<TerminalSocket> weak = weak_from_this();
  tick_timer_ = loop().after(ctx_->options.idle_timeout / 2, [weak] {
    if (auto self = weak.lock()) self->idle_tick();
  });
  if (authenticated_) {
    attach();
  } else {
    auth_timer_ = loop().after(ctx_->options.auth_timeout, [weak] {
      auto self = weak.lock();
      if (self && !self->authenticated_) self->do_close(kCloseBadAuth, "Auth timeout or invalid payload");
    });
    // Until its auth frame, its place may go to a new connection, as an idle request's may.
    slot_.idle();
    slot_.on_evict([weak, &loop = loop_] {
      loop.post([weak] {
        auto self = weak.lock();
        if (self && !self->authenticated_)
          self->do_close(kCloseTryAgain, "Too many connections: this one had not authenticated (limits.connections)");
      });
    });
  }
}

// ---------------------------------------------------------------- reading

void TerminalSocket::on_ready(uint32_t events) {
  if (gone_) return;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    drained_ = false;
    last_read_ = Clock::now();
    const bool open = frames_.read();  // messages are handled as they complete
    if (gone_) return;
    if (!open && frames_.peer_gone()) return tear_down();  // the connection ended or failed
    if (!open) closing_ = true;                            // wslay answers a close (or closes with 1002, 1007 or 1009)
  }
  flush();
}

void TerminalSocket::on_message(bool text, std::string_view payload) {
  if (gone_ || closing_) return;
  if (!authenticated_) {
    if (!text) return do_close(kCloseBadAuth, "Auth timeout or invalid payload");
    return on_auth_frame(payload);
  }
  if (attaching_) {  // read with the auth frame: kept for the terminal, within the input bound
    if (early_bytes_ + payload.size() > ctx_->options.max_input_in_flight) return;
    early_bytes_ += payload.size();
    early_.emplace_back(text, std::string(payload));
    return;
  }
  if (text) return on_text(payload);
  on_keystrokes(payload);
}

void TerminalSocket::on_auth_frame(std::string_view text) {
  auto msg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const bool is_auth = msg.is_object() && msg.value("type", nlohmann::json()) == "auth";
  const auto token = is_auth ? msg.find("token") : msg.end();
  if (!is_auth || token == msg.end() || !token->is_string())
    return do_close(kCloseBadAuth, "Auth timeout or invalid payload");
  const std::string& key = token->get_ref<const std::string&>();
  if (ctx_->auth.accepts("Bearer " + key)) {
    if (!names_user(request_))  // the shared key names no one
      return do_close(kCloseBadAuth, "Missing user: send X-User-Id or ?user_id=, or authenticate with a user's key");
    report_(101, {.credential = TakeoverReport::Credential::api_key, .head = &request_});
  } else {
    const std::optional<std::string> user =
        ctx_->user_keys && UserKeys::looks_like(key) ? ctx_->user_keys->user_of(key) : std::nullopt;
    if (!user) {
      report_(101, {.refused = true, .key_in_frame = true, .head = &request_});  // an Authentication failure
      return do_close(kCloseBadAuth, "Invalid API key");
    }
    if (!bind_user(request_, *user)) {
      report_(101, {.credential = TakeoverReport::Credential::user_key, .refused = true, .head = &request_});
      return do_close(kCloseForbidden, "This API key belongs to another user than the one the request names");
    }
    report_(101, {.credential = TakeoverReport::Credential::user_key, .head = &request_});
    // The upgrade named no user, so its profile could not be checked for one: now it can.
    if (ctx_->profiles)
      if (std::optional<std::string> closed = profile_closed_to(*ctx_->profiles->get(), request_))
        return do_close(kCloseForbidden, *closed);
  }
  authenticated_ = true;
  slot_.on_evict(nullptr);
  slot_.busy();
  slot_.authenticated();
  loop().cancel(auth_timer_);
  attach();
}

// Only after authentication: an unauthenticated client may neither create an account nor
// learn whether a terminal exists. The caller is resolved at once when that costs memory only,
// else on the callers' pool (accounts/caller_routes.hpp), never on this loop; what the client
// sends meanwhile waits in early_, and no more is read.
void TerminalSocket::attach() {
  attaching_ = true;
  update_interest();
  std::weak_ptr<TerminalSocket> weak = weak_from_this();
  TerminalLoop* loop = &loop_;
  // Attaching finds a terminal the account has, never makes one: an account with no volume gets none.
  accounts::resolve_caller(ctx_->callers, request_, /*query_user_allowed=*/true, accounts::HomeUse::read,
                           [weak, loop](accounts::Resolved resolved) {
                             if (loop->on_loop_thread()) {  // at once, inside on_ready: it flushes
                               if (auto self = weak.lock()) self->on_caller(resolved);
                               return;
                             }
                             loop->post([weak, resolved = std::move(resolved)] {
                               auto self = weak.lock();
                               if (!self) return;
                               self->on_caller(resolved);
                               self->flush();
                             });
                           });
}

void TerminalSocket::on_caller(const accounts::Resolved& resolved) {
  attaching_ = false;
  if (gone_) return;
  std::string account;
  try {
    account = resolved.get().box;
  } catch (const HttpError& e) {
    return do_close(kCloseNotFound, std::string(e.detail()));
  } catch (const std::exception& e) {
    log::error("http", "WS /api/terminals/{}: {}", terminal_id_, e.what());
    return do_close(kCloseInternal, "Internal Server Error");
  }
  std::weak_ptr<TerminalSocket> weak = weak_from_this();
  exec::TerminalSink sink;
  sink.output = [weak](std::string_view bytes) {
    if (auto self = weak.lock()) self->on_output(bytes);
  };
  sink.ended = [weak](const std::string& why) {
    if (auto self = weak.lock()) self->do_close(kCloseEnded, why);
  };
  sink.input_done = [weak](std::size_t bytes) {
    if (auto self = weak.lock()) self->on_input_taken(bytes);
  };
  client_ = ctx_->terminals.attach(account, terminal_id_, std::move(sink));
  if (!client_) return do_close(kCloseNotFound, "Session not found");
  log::info("http", "{} WS /api/terminals/{} attached ({})", request_.remote_address, terminal_id_, account);
  for (auto& [text, payload] : std::exchange(early_, {})) on_message(text, payload);
  early_bytes_ = 0;
  if (!gone_) update_interest();  // reading again
}

// A JSON object with a "type" is a control message: a resize is applied, others (a repeated
// auth frame, a client's own ping) are ignored. Any other text is keystrokes, as a binary
// frame would be (clients that send text frames from xterm.js's onData).
void TerminalSocket::on_text(std::string_view text) {
  auto msg = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!msg.is_object() || !msg.contains("type")) return on_keystrokes(text);
  if (msg["type"] != "resize" || !client_) return;
  auto dimension = [&](const char* key) -> std::uint16_t {
    auto it = msg.find(key);
    if (it == msg.end() || !it->is_number_integer()) return 0;
    const auto v = it->get<std::int64_t>();
    return v >= 1 && v <= 0xFFFF ? static_cast<std::uint16_t>(v) : 0;
  };
  client_->resize(dimension("cols"), dimension("rows"));  // 0 in either: ignored
}

void TerminalSocket::on_keystrokes(std::string_view data) {
  if (!client_ || data.empty()) return;
  // On the loop, the terminal writes it to the pty at once; what the pty could not take yet
  // comes back through the sink's input_done() once it has.
  const std::size_t done = client_->input(data);
  input_in_flight_ += data.size() - std::min(done, data.size());
}

void TerminalSocket::on_input_taken(std::size_t bytes) {
  const bool held = input_held();
  input_in_flight_ -= std::min(bytes, input_in_flight_);
  if (held && !gone_) update_interest();
}

// ---------------------------------------------------------------- writing

void TerminalSocket::on_output(std::string_view bytes) {
  if (gone_ || closing_) return;
  if (frames_.queued_bytes() + bytes.size() > ctx_->options.max_queued_bytes) {
    log::warn("http", "{} WS /api/terminals/{}: client too slow, {} bytes of output waiting; dropped",
              request_.remote_address, terminal_id_, frames_.queued_bytes());
    return tear_down();
  }
  frames_.queue_binary(bytes);
  flush();
}

void TerminalSocket::flush() {
  if (gone_) return;
  if (!frames_.flush()) return tear_down();  // the peer is gone
  // The close handshake is over once ours is out and theirs came (or reading is over anyway).
  if (frames_.close_sent() && !frames_.wants_write() && (frames_.close_received() || !frames_.read_enabled()))
    return tear_down();
  update_interest();
}

void TerminalSocket::update_interest() {
  uint32_t want = 0;
  if (frames_.read_enabled() && !input_held() && !attaching_) want |= EPOLLIN;
  if (frames_.wants_write()) want |= EPOLLOUT;
  if (want != interest_) {
    interest_ = want;
    loop().modify(watch_, want);
  }
}

// Every half idle_timeout: a ping once the client has been quiet that long, and the end once
// it has been quiet for all of it (a live client answers pings).
void TerminalSocket::idle_tick() {
  if (gone_) return;
  const auto quiet = Clock::now() - last_read_;
  if (quiet >= ctx_->options.idle_timeout) return tear_down();
  if (quiet >= ctx_->options.idle_timeout / 2 && !closing_) {
    frames_.queue_ping();
    flush();
    if (gone_) return;
  }
  std::weak_ptr<TerminalSocket> weak = weak_from_this();
  tick_timer_ = loop().after(ctx_->options.idle_timeout / 2, [weak] {
    if (auto self = weak.lock()) self->idle_tick();
  });
}

// ---------------------------------------------------------------- closing

// The close frame goes after the output already queued (a shell's last words before "exited").
void TerminalSocket::do_close(std::uint16_t code, std::string reason) {
  if (gone_ || closing_) return;
  closing_ = true;
  // Closed before an auth frame decided (a timeout, a payload that is no auth frame): 4001 is
  // an Authentication failure, any other close a connection that never named anyone.
  report_(101, {.refused = code == kCloseBadAuth, .head = &request_});
  loop().cancel(auth_timer_);
  if (client_) {
    client_->detach();
    client_.reset();
  }
  log::info("http", "{} WS /api/terminals/{} closed: {} {}", request_.remote_address, terminal_id_, code, reason);
  frames_.queue_close(code, reason);
  std::weak_ptr<TerminalSocket> weak = weak_from_this();
  close_timer_ = loop().after(kHandshakeTimeout, [weak] {
    if (auto self = weak.lock()) self->tear_down();
  });
  flush();
}

void TerminalSocket::tear_down() {
  if (gone_) return;
  gone_ = true;
  report_(101, {.head = &request_});  // the client left before its auth frame
  loop().cancel(auth_timer_);
  loop().cancel(tick_timer_);
  loop().cancel(close_timer_);
  if (client_) {
    client_->detach();
    client_.reset();
  }
  loop().unwatch(watch_);  // drops the loop's reference: this goes once the caller returns
  fd_.reset();
  slot_ = {};
}

}  // namespace agentbox::api
