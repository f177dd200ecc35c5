#include "http/websocket_frames.hpp"

#include <wslay/wslay.h>

#include <algorithm>
#include <new>

#include "util/utf8.hpp"

namespace agentbox::http {

namespace {
constexpr std::size_t kMaxCloseReason = 123;  // RFC 6455: a close frame's payload is at most 125 bytes
}  // namespace

struct WebSocketFrames::Glue {
  static ssize_t recv(wslay_event_context_ptr ctx, uint8_t* buf, size_t len, int, void* user) {
    auto* self = static_cast<WebSocketFrames*>(user);
    const long n = self->recv_(buf, len);
    if (n > 0) return n;
    if (n == -1) {
      wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
      return -1;
    }
    self->peer_gone_ = true;  // the end, or an error: nothing more comes
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }

  // wslay hands a frame's head (flagged MSG_MORE) and its payload over in two calls: the head
  // is kept and goes out with the payload, one segment for a keystroke's echo, not two.
  static ssize_t send(wslay_event_context_ptr ctx, const uint8_t* data, size_t len, int flags, void* user) {
    auto* self = static_cast<WebSocketFrames*>(user);
    const std::string_view chunk(reinterpret_cast<const char*>(data), len);
    if ((flags & WSLAY_MSG_MORE) && self->head_.empty()) {
      self->head_.assign(chunk);
      return static_cast<ssize_t>(len);
    }
    const long n = self->send_(self->head_, chunk);
    if (n < 0) {
      wslay_event_set_error(ctx, n == -1 ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
      return -1;
    }
    const std::size_t of_head = std::min(static_cast<std::size_t>(n), self->head_.size());
    self->head_.erase(0, of_head);
    if (!self->head_.empty() || static_cast<std::size_t>(n) == of_head) {
      wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);  // the payload waits for the rest of the head
      return -1;
    }
    return static_cast<ssize_t>(static_cast<std::size_t>(n) - of_head);
  }

  static void message(wslay_event_context_ptr ctx, const wslay_event_on_msg_recv_arg* arg, void* user) {
    auto* self = static_cast<WebSocketFrames*>(user);
    if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME) return;  // control: wslay's
    const std::string_view payload(reinterpret_cast<const char*>(arg->msg), arg->msg_length);
    const bool text = arg->opcode == WSLAY_TEXT_FRAME;
    if (text && !is_valid_utf8(payload)) {
      wslay_event_shutdown_read(ctx);
      static constexpr std::string_view kWhy = "text message is not UTF-8";
      wslay_event_queue_close(ctx, WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA, reinterpret_cast<const uint8_t*>(kWhy.data()),
                              kWhy.size());
      return;
    }
    if (self->on_message_) self->on_message_(text, payload);
  }
};

WebSocketFrames::WebSocketFrames(Recv recv, Send send, OnMessage on_message, std::size_t max_message_bytes)
    : recv_(std::move(recv)), send_(std::move(send)), on_message_(std::move(on_message)) {
  static const wslay_event_callbacks callbacks = {
      &Glue::recv, &Glue::send, nullptr, nullptr, nullptr, nullptr, &Glue::message,
  };
  if (wslay_event_context_server_init(&ctx_, &callbacks, this) != 0) throw std::bad_alloc();
  wslay_event_config_set_max_recv_msg_length(ctx_, max_message_bytes);
}

WebSocketFrames::~WebSocketFrames() { wslay_event_context_free(ctx_); }

bool WebSocketFrames::read() {
  if (!wslay_event_get_read_enabled(ctx_)) return false;
  // A failure (the peer's end, a protocol error) stops reading; wslay queued a close if due.
  if (wslay_event_recv(ctx_) != 0 || peer_gone_) {
    wslay_event_shutdown_read(ctx_);
    return false;
  }
  return wslay_event_get_read_enabled(ctx_) != 0;
}

bool WebSocketFrames::flush() {
  for (;;) {
    if (wslay_event_want_write(ctx_) && wslay_event_send(ctx_) != 0) {
      wslay_event_shutdown_write(ctx_);
      return false;
    }
    // The close goes once everything queued before it is out: then sent at once, too.
    if (!close_ || wslay_event_want_write(ctx_)) return true;
    const std::size_t n = std::min(close_->reason.size(), kMaxCloseReason - 1);  // wslay: fewer than 123
    wslay_event_queue_close(ctx_, close_->code, reinterpret_cast<const uint8_t*>(close_->reason.data()), n);
    close_.reset();
  }
}

void WebSocketFrames::queue_binary(std::string_view bytes) {
  if (close_) return;
  const wslay_event_msg msg{WSLAY_BINARY_FRAME, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
  wslay_event_queue_msg(ctx_, &msg);  // refused after a close: nothing more goes out then
}

void WebSocketFrames::queue_ping() {
  const wslay_event_msg msg{WSLAY_PING, nullptr, 0};
  wslay_event_queue_msg(ctx_, &msg);
}

void WebSocketFrames::queue_close(uint16_t code, std::string_view reason) {
  if (!close_ && !close_sent()) close_ = Close{code, std::string(reason)};
}

bool WebSocketFrames::wants_write() const { return close_ || wslay_event_want_write(ctx_) != 0; }
std::size_t WebSocketFrames::queued_bytes() const { return wslay_event_get_queued_msg_length(ctx_); }
bool WebSocketFrames::close_sent() const { return wslay_event_get_close_sent(ctx_) != 0; }
bool WebSocketFrames::close_received() const { return wslay_event_get_close_received(ctx_) != 0; }
bool WebSocketFrames::read_enabled() const { return wslay_event_get_read_enabled(ctx_) != 0; }

}  // namespace agentbox::http
