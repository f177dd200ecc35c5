#pragma once
// One terminal WebSocket (API.md Part A, WS /api/terminals/{id}). Beast answers the upgrade on
// the API's io thread; the connection then moves to the terminals' TerminalLoop, where the pty it
// attaches to is served too: a keystroke is read, unframed (http/websocket_frames.hpp) and
// written to the pty in one handler, and the echo read from the pty is framed and sent in one
// more, as a hand-written relay would (bench/RESULTS.md, the terminal floor). The life of a
// connection:
//
//   upgrade (Beast, io thread) → loop: [the auth frame, within auth_timeout] → attach
//        → keystrokes and resizes in, replay and output out
//        → close (a code and a reason: 4001 bad key, 4004 no such terminal, 1000 it ended)
//
// The Bearer key on the upgrade authenticates at once; otherwise the first frame must be
// {"type":"auth","token":KEY} (Open WebUI's way). The user is X-User-Id, X-OpenWebUI-User-Id or
// ?user_id=. Limits where the bytes are read: a message over max_message_bytes closes with 1009,
// no byte for idle_timeout (pings are sent at half of it) drops the connection, and a client
// that lets more than max_queued_bytes of output wait is dropped rather than held in memory.
// Input it sends faster than the shell takes it is not read until the terminal took most of it.
//
// A user's own key (http/user_keys.hpp), on the upgrade or in the auth frame, names the user:
// the upgrade then needs none, and one naming another user is refused (403 on the upgrade,
// close 4003 after it).
//
// Runs on: the terminals' loop (util/terminal_loop.hpp); serve() on the API's io thread, and a
// caller that is slow to resolve on the callers' pool, whose answer is posted back to the loop.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accounts/caller_routes.hpp"
#include "accounts/directory.hpp"
#include "config/profile_table.hpp"
#include "exec/terminals.hpp"
#include "http/api_key_auth.hpp"
#include "http/router.hpp"
#include "http/user_keys.hpp"
#include "http/websocket_frames.hpp"
#include "util/terminal_loop.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct TerminalSocketOptions {
  std::chrono::milliseconds auth_timeout{10'000};  // upgrade → the auth frame (Open Terminal: 10 s)
  std::chrono::milliseconds idle_timeout{60'000};  // no byte at all, pongs included: dropped
  std::size_t max_message_bytes = 64 * 1024;       // one message from the client
  std::size_t max_queued_bytes = 4 * 1024 * 1024;  // output waiting for a slow client: dropped past it
  std::size_t max_input_in_flight = 256 * 1024;    // keystrokes given to the terminal, not yet taken
};

// What every terminal socket shares; outlives them (the routes own it).
struct TerminalSocketContext {
  exec::Terminals& terminals;
  accounts::AccountDirectory& callers;
  ApiKeyAuth auth;  // the shared key, in an auth frame
  TerminalSocketOptions options;
  std::shared_ptr<const UserKeys> user_keys;  // a user's key, in an auth frame, names its user; none: refused
  // Under /p/{profile}: the profiles, to check the user an auth frame names (api/profiles.hpp);
  // null: none configured.
  std::shared_ptr<const ProfileTable> profiles;
};

class TerminalSocket : public std::enable_shared_from_this<TerminalSocket> {
 public:
  // takeover: a WebSocket upgrade of GET /api/terminals/{id}. Answers it (or turns it down
  // with an HTTP error) and serves the connection.
  static void serve(Takeover takeover, std::shared_ptr<const TerminalSocketContext> ctx);

  // On the loop: fd has had its upgrade answered; slot is its place in the connection limits.
  // report: the upgrade's, when the auth frame is still to decide it (http/takeover_report.hpp).
  TerminalSocket(UniqueFd fd, Request request, bool authenticated, std::shared_ptr<const TerminalSocketContext> ctx,
                 ConnectionSlot slot = {}, TakeoverReport report = {});
  ~TerminalSocket();
  void start();

 private:
  void on_ready(uint32_t events);
  void on_message(bool text, std::string_view payload);
  void on_auth_frame(std::string_view text);
  void attach();
  void on_caller(const accounts::Resolved& resolved);
  void on_text(std::string_view text);
  void on_keystrokes(std::string_view bytes);
  void on_input_taken(std::size_t bytes);
  // The shell has not taken max_input_in_flight of the client's keystrokes: read no more.
  bool input_held() const { return input_in_flight_ >= ctx_->options.max_input_in_flight; }
  void on_output(std::string_view bytes);  // the terminal's sink
  void idle_tick();

  void do_close(std::uint16_t code, std::string reason);
  void flush();            // sends what is queued; tears down once the close is done
  void update_interest();  // EPOLLIN unless held back by input; EPOLLOUT while frames wait
  void tear_down();        // the connection goes (without a close handshake if none was done)

  TerminalLoop& loop() const { return loop_; }

  std::shared_ptr<const TerminalSocketContext> ctx_;
  TerminalLoop& loop_;     // the terminals'; it outlives every socket on it (they go when it stops)
  ConnectionSlot slot_;    // idle (may make room for others) until the auth frame
  Request request_;        // the upgrade's head
  TakeoverReport report_;  // the upgrade's 101, reported once the auth frame decided who it is
  std::string terminal_id_;
  UniqueFd fd_;
  WebSocketFrames frames_;
  TerminalLoop::WatchId watch_ = 0;
  uint32_t interest_ = 0;
  TerminalLoop::TimerId auth_timer_ = 0, tick_timer_ = 0, close_timer_ = 0;
  TerminalLoop::Clock::time_point last_read_;
  bool authenticated_ = false;
  bool attaching_ = false;  // the caller is being resolved: messages wait in early_, none is read
  std::vector<std::pair<bool, std::string>> early_;  // (text?, payload) read with the auth frame
  std::size_t early_bytes_ = 0;
  bool closing_ = false;  // a close frame is queued
  bool gone_ = false;     // torn down
  bool drained_ = false;  // the last recv of this wake-up came up short: the socket is empty
  std::size_t input_in_flight_ = 0;
  std::shared_ptr<exec::TerminalClient> client_;
};

}  // namespace agentbox::api
