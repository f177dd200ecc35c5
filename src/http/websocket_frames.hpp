#pragma once
// The frames of one server-side WebSocket after its handshake (RFC 6455), by wslay (Debian's
// libwslay): messages in, messages out, pings answered, the close handshake, a size limit per
// message (1009 past it), text checked as UTF-8 (1007). It does no I/O of its own: recv and send
// are the caller's (non-blocking, EAGAIN as would_block), so it serves a socket on any loop and,
// in the fuzzer, bytes in memory.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

struct wslay_event_context;

namespace agentbox::http {

class WebSocketFrames {
 public:
  // Moves up to len bytes; > 0 done, 0 the peer closed, -1 would block, -2 failed. Send gets
  // a frame's head and (some of) its payload together, to go out in one segment; it answers
  // how many bytes of both it sent.
  using Recv = std::function<long(uint8_t* buf, std::size_t len)>;
  using Send = std::function<long(std::string_view head, std::string_view payload)>;
  using OnMessage = std::function<void(bool text, std::string_view payload)>;

  WebSocketFrames(Recv recv, Send send, OnMessage on_message, std::size_t max_message_bytes);
  ~WebSocketFrames();
  WebSocketFrames(const WebSocketFrames&) = delete;
  WebSocketFrames& operator=(const WebSocketFrames&) = delete;

  // Reads what recv gives until it would block, calling on_message per complete message;
  // queues pongs and the close reply. False once the connection is over for reading (the peer
  // closed it or broke the protocol, or recv failed): what is queued may still go out.
  bool read();
  // Sends what is queued until send would block. False when send failed.
  bool flush();

  void queue_binary(std::string_view bytes);
  void queue_ping();
  // A close frame with code and reason (cut to 122 bytes), sent once what was queued before it
  // is out (wslay would send a control frame first); nothing is queued after it.
  void queue_close(uint16_t code, std::string_view reason);

  bool wants_write() const;          // something queued is not sent yet
  std::size_t queued_bytes() const;  // payload bytes queued, not sent yet
  bool close_sent() const;
  bool close_received() const;
  bool read_enabled() const;                     // false after a close frame, a protocol error, a too big message
  bool peer_gone() const { return peer_gone_; }  // recv saw the end of the connection or failed

 private:
  struct Glue;  // wslay's callbacks
  friend struct Glue;

  wslay_event_context* ctx_ = nullptr;
  Recv recv_;
  Send send_;
  OnMessage on_message_;
  bool peer_gone_ = false;  // recv saw the end or an error
  std::string head_;        // of the frame being sent: taken from wslay, not sent yet
  struct Close {
    uint16_t code = 0;
    std::string reason;
  };
  std::optional<Close> close_;  // asked for, waiting for the messages queued before it
};

}  // namespace agentbox::http
