#pragma once
// Terminals: the interactive shells of /api/terminals (API.md Part A). Each is its account's
// login shell on a pty in the account's box; the daemon holds the pty master. Every pty is read
// and written on one TerminalLoop (util/terminal_loop.hpp), the thread its clients' WebSockets live on
// too, so a keystroke and its echo each cost one wake-up; at most a few reads per wake-up, then
// the other terminals get their turn. Output goes to every attached client and into a bounded
// replay buffer, so a client that attaches later (a reload, a second tab) first sees the recent
// screen. A client
// leaving does not end the shell; a terminal ends when its shell exits, its box goes, it is
// deleted (its whole session is signalled: the shell and every job started from it), or it has
// had no client and no output for the idle timeout. Every lookup is scoped to one account:
// another account's id is "not found", and ids are random, so they are not an oracle either.
// A terminal made for a chat (X-Session-Id) belongs to it: lists can be narrowed to the chat,
// and the assistant of that chat reaches the one its user has attached (attached_in_chat(),
// recent_output(), type()).
//
// Runs on: the terminals' loop ("terminals", util/terminal_loop.hpp) for every pty and timer;
// the boxes' answers arrive on the box loop and are posted there; every handler through one
// ShutdownGuard (util/shutdown_guard.hpp). Public methods from any thread.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "box/box_owner.hpp"
#include "util/error.hpp"
#include "util/terminal_loop.hpp"

namespace agentbox::exec {

// What terminals need of the boxes: the daemon's is exec/account_boxes.hpp; tests fake it.
class TerminalSpawner {
 public:
  virtual ~TerminalSpawner() = default;
  // Starts req (tty) in the box spec describes; the handlers report its start and end.
  virtual uint64_t spawn_terminal(const BoxSpec& spec, SpawnRequest req, SpawnHandlers handlers) = 0;
  // Signals every process of spawn id's session (the shell and its jobs, background ones too);
  // done(delivered), on any thread, once.
  virtual void signal_session(const std::string& account, uint64_t id, int sig,
                              std::function<void(bool delivered)> done) = 0;
};

struct TerminalOptions {
  size_t max_per_account = 16;                          // open (and opening) terminals per account
  std::chrono::milliseconds idle_timeout{3600 * 1000};  // no client and no output for this long: ended
  size_t replay_bytes = 64 << 10;                       // newest output kept for clients that attach later
  std::chrono::milliseconds kill_grace{2000};           // SIGHUP to the session, SIGKILL at the latest after this
  size_t input_queue_bytes = 1 << 20;                   // keystrokes not yet taken by the pty; past it, dropped
};

struct TerminalInfo {
  std::string id;
  std::string created_at;  // ISO 8601 UTC, as Open Terminal gives it ("2026-01-02T03:04:05.678Z")
  pid_t pid = 0;           // the shell's pid in its box
  std::string chat;        // the chat it was made for (X-Session-Id), "" for none
};

// The account already has max_per_account terminals.
class TerminalLimitError : public Error {
 public:
  explicit TerminalLimitError(size_t limit);
  size_t limit() const { return limit_; }

 private:
  size_t limit_;
};

// What create() reports: the terminal, or why it could not start (SpawnError: the shell could
// not run; BoxUnavailable: its box could not serve; Error: anything else).
struct CreateOutcome {
  std::optional<TerminalInfo> terminal;
  std::exception_ptr error;
};

// The login shell an account's terminal runs: spec.shell -l in cwd, with the box's base
// environment for a terminal and PWD, on a pty of cols x rows.
SpawnRequest login_shell_request(const BoxSpec& spec, const std::string& cwd, uint16_t cols = 80, uint16_t rows = 24);

// A client's side of a terminal (a WebSocket). Called on the loop's thread: output() with the
// replay first, then live output as it is read; ended() once, last. A sink may detach its
// client from within these calls.
struct TerminalSink {
  std::function<void(std::string_view bytes)> output;
  std::function<void(const std::string& why)> ended;
  // Keystrokes input() left waiting are done with: taken by the pty, or dropped (the terminal
  // ended). `bytes` of them, reported piece by piece in order.
  std::function<void(size_t bytes)> input_done;
};

// A client attached to a terminal. Any thread. Dropping the last reference detaches it.
class TerminalClient {
 public:
  virtual ~TerminalClient() = default;
  // Keystrokes, written to the pty in order. Returns how many are done with at once: taken by
  // the pty, or dropped (the terminal ended or this client did, or more than input_queue_bytes
  // were waiting). The rest wait for the pty and go to the sink's input_done() as they are
  // taken: a client reads on once enough of it is. Called on the loop's thread (a WebSocket's
  // own), a pty that takes them all costs one write(2) and nothing else; from another thread
  // they are handed over and all of them are reported later.
  virtual size_t input(std::string_view bytes) = 0;
  virtual void resize(uint16_t cols, uint16_t rows) = 0;
  // No sink call starts after this returns (one running may finish).
  virtual void detach() = 0;
};

class Terminals {
 public:
  // Runs on `loop`, which must outlive this object and run while it is used.
  Terminals(TerminalLoop& loop, TerminalSpawner& boxes, TerminalOptions options);
  // shut_down().
  ~Terminals();
  Terminals(const Terminals&) = delete;
  Terminals& operator=(const Terminals&) = delete;

  // Starts account spec.name's login shell (req from login_shell_request). Throws
  // TerminalLimitError at once when the account is at its cap; else done runs once, on the
  // loop's thread or a box loop thread, with the new terminal or the error.
  void create(const BoxSpec& spec, SpawnRequest req, std::function<void(CreateOutcome)> done);
  // The same, for chat `chat` ("" for none).
  void create(const BoxSpec& spec, SpawnRequest req, std::string chat, std::function<void(CreateOutcome)> done);

  // The account's terminals, oldest first.
  std::vector<TerminalInfo> list(const std::string& account) const;
  // Those of chat `chat` only; all of the account's when chat is "".
  std::vector<TerminalInfo> list(const std::string& account, const std::string& chat) const;
  std::optional<TerminalInfo> get(const std::string& account, const std::string& id) const;

  // Ends the terminal and everything started from it: its session gets SIGHUP (the shell and
  // its jobs, background ones too), then SIGKILL once the shell has exited (what ignored the
  // hangup) or after kill_grace, whichever comes first. It is gone from list() and get() at
  // once, and its clients are told why. done(false) at once when there is no such terminal;
  // else done(true) on a loop thread once the shell has exited and the SIGKILL was sent, or
  // both signals were sent and kill_grace passed again (a box that does not answer).
  void remove(const std::string& account, const std::string& id, std::function<void(bool found)> done);

  // Attaches sink: nullptr when the account has no such terminal. Else the sink gets the replay
  // and then live output; if the terminal ends meanwhile, ended() instead.
  std::shared_ptr<TerminalClient> attach(const std::string& account, const std::string& id, TerminalSink sink);

  // The account's terminal of chat `chat` ("" never matches) that has a client attached now,
  // the one attached last when there are several; nullopt when none has.
  std::optional<TerminalInfo> attached_in_chat(const std::string& account, const std::string& chat) const;

  // The newest output kept for replay (TerminalOptions::replay_bytes), raw; done(nullopt) when
  // the account has no such open terminal. done runs once, on the loop's thread, or at once.
  void recent_output(const std::string& account, const std::string& id,
                     std::function<void(std::optional<std::string>)> done);

  // Keystrokes typed into the terminal as a client's would be (queued when the pty is full);
  // done(false) when there is no such open terminal or it could not take them (ended, or
  // input_queue_bytes waiting already). Once, on the loop's thread, or at once.
  void type(const std::string& account, const std::string& id, std::string bytes, std::function<void(bool)> done);

  size_t count() const;        // terminals open now (all accounts)
  TerminalLoop& loop() const;  // where the ptys are served, and their clients may be

  // Shells are left to their boxes (which the daemon stops next); no handler of this object
  // and no sink call runs after it returns. Call it before the clients' io_context goes (their
  // sinks post to it). Idempotent; not from the loop's thread.
  void shut_down();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the handlers it queues on the loop
};

}  // namespace agentbox::exec
