#pragma once
// One terminal WebSocket (API.md Part A, WS /api/terminals/{id}): owns its stream, read buffer,
// timers and a bounded output queue, runs on its connection's strand and stays alive through
// shared_from_this; the terminal's output arrives from the box loop and is posted here. The
// life of a connection, as do_x/on_x pairs:
//
//   accept → [read the auth frame, within auth_timeout] → attach → read … (keystrokes, resize)
//                                                                → write … (replay, output)
//          → close (a code and a reason: 4001 bad key, 4004 no such terminal, 1000 it ended)
//
// The Bearer key on the upgrade authenticates at once; otherwise the first frame must be
// {"type":"auth","token":KEY} (Open WebUI's way). The user is X-User-Id, X-OpenWebUI-User-Id or
// ?user_id=. Limits where the bytes are read: a message over max_message_bytes closes with 1009,
// no frame for idle_timeout (pings are sent at half of it) closes, and a client that lets more
// than max_queued_bytes of output wait is dropped rather than held in memory. Input it sends
// faster than the shell takes it is not read until the terminal has taken most of it.
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/stream.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "exec/terminals.hpp"
#include "server/api_key_auth.hpp"
#include "server/caller.hpp"
#include "server/router.hpp"

namespace agentbox::server {

struct TerminalSocketOptions {
  std::chrono::milliseconds auth_timeout{10'000};   // upgrade → the auth frame (Open Terminal: 10 s)
  std::chrono::milliseconds idle_timeout{60'000};   // no frame at all, pongs included: closed
  std::size_t max_message_bytes = 64 * 1024;        // one message from the client
  std::size_t max_queued_bytes = 4 * 1024 * 1024;   // output waiting for a slow client: dropped past it
  std::size_t max_input_in_flight = 256 * 1024;     // keystrokes given to the terminal, not yet taken
};

// What every terminal socket shares; outlives them (the routes own it).
struct TerminalSocketContext {
  exec::Terminals& terminals;
  CallerDirectory& callers;
  ApiKeyAuth auth;
  TerminalSocketOptions options;
};

class TerminalSocket : public std::enable_shared_from_this<TerminalSocket> {
 public:
  // takeover: a WebSocket upgrade of GET /api/terminals/{id}.
  TerminalSocket(Takeover takeover, std::shared_ptr<const TerminalSocketContext> ctx);
  ~TerminalSocket();

  // Answers the upgrade (or turns it down with an HTTP error) and serves the connection.
  static void serve(Takeover takeover, std::shared_ptr<const TerminalSocketContext> ctx);

 private:
  using Stream = boost::beast::websocket::stream<boost::beast::tcp_stream>;
  using error_code = boost::beast::error_code;

  void do_accept();
  void on_accept(error_code ec);
  void do_auth_deadline();
  void on_auth_frame(const std::string& text);
  void attach();
  void do_read();
  void on_read(error_code ec, std::size_t bytes);
  void on_text(std::string text);
  void on_keystrokes(std::string bytes);
  void on_input_taken(std::size_t bytes);

  // From the terminal's strand: posted here.
  void post_output(std::string_view bytes);
  void post_ended(const std::string& why);

  void queue_output(std::string bytes);
  void do_write();
  void on_write(error_code ec, std::size_t bytes);
  void do_close(std::uint16_t code, std::string reason);
  void send_close();
  void on_close(error_code ec);
  void drop();  // the connection goes without a close handshake
  void tear_down();

  std::shared_ptr<const TerminalSocketContext> ctx_;
  Request request_;  // the upgrade's head
  std::string terminal_id_;
  Stream ws_;
  boost::beast::flat_buffer read_buffer_;
  boost::asio::steady_timer auth_timer_;
  std::unique_ptr<Takeover::Parser> parser_;  // holds the upgrade request async_accept answers

  // The strand only.
  bool authenticated_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool closing_ = false;     // a close was asked for; it is sent once the outbox is empty
  bool close_sent_ = false;
  std::uint16_t close_code_ = 0;
  std::string close_reason_;
  bool gone_ = false;  // torn down
  std::deque<std::string> outbox_;
  std::size_t input_in_flight_ = 0;
  std::shared_ptr<exec::TerminalClient> client_;

  // Any thread: output posted but not yet written (the bound on a slow client).
  std::atomic<std::size_t> queued_bytes_{0};
  std::atomic<bool> overflowed_{false};
};

}  // namespace agentbox::server
