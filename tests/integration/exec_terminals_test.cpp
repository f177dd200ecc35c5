// Terminals over a fake box whose "shell" is the test itself at the slave end of a real pty:
// what the test writes there is the shell's output, what it reads there are the keystrokes,
// and the test decides when the shell ends and how it answers signals. Checked: the cap per
// account, ownership, output to every client, keystrokes and resizes to the pty, the bounded
// replay, the idle end, a shell's exit ending its terminal, and DELETE's SIGHUP then SIGKILL.
// (tests/e2e/test_terminals.py drives the same through real boxes and the WebSocket.)
#include "exec/terminals.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <condition_variable>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "support/sigpipe_ignored.hpp"
#include "util/file_io.hpp"
#include "util/terminal_loop.hpp"

namespace agentbox::exec {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Waits up to `limit` for pred, checking every few milliseconds.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5000ms) {
  const auto deadline = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class PtyPort : public TerminalSpawner {
 public:
  struct Shell {
    std::string account;
    UniqueFd slave;  // the shell's end of its terminal
    SpawnHandlers handlers;
    bool ended = false;
  };

  bool fail_next = false;
  bool hup_ends_shell = true;  // like bash: SIGHUP ends it; false: only SIGKILL does

  uint64_t spawn_terminal(const BoxSpec& spec, SpawnRequest req, SpawnHandlers h) override {
    if (fail_next) {
      fail_next = false;
      h.failed(std::make_exception_ptr(SpawnError("exec(/bin/bash)", ENOENT)));
      return 0;
    }
    int master = -1, slave = -1;
    winsize ws{};
    ws.ws_row = req.rows;
    ws.ws_col = req.cols;
    if (::openpty(&master, &slave, nullptr, nullptr, &ws) != 0) throw sys_error("openpty");
    termios raw{};
    ::tcgetattr(slave, &raw);
    ::cfmakeraw(&raw);  // bytes pass as they are, no echo
    ::tcsetattr(slave, TCSANOW, &raw);
    std::lock_guard lock(mu_);
    const uint64_t id = ++next_;
    shells_[id] = Shell{spec.name, UniqueFd(slave), h};
    SpawnResult r;
    r.id = id;
    r.pid = static_cast<pid_t>(100 + id);
    r.pty_master = UniqueFd(master);
    h.started(std::move(r));
    return id;
  }

  void signal_session(const std::string& account, uint64_t id, int sig, std::function<void(bool)> done) override {
    bool ends;
    {
      std::lock_guard lock(mu_);
      signals_.push_back({account, id, sig});
      auto it = shells_.find(id);
      ends = it != shells_.end() && !it->second.ended && (sig == SIGKILL || (sig == SIGHUP && hup_ends_shell));
    }
    if (ends) end(id, sig);  // killed by sig: its raw wait status is the signal number
    done(true);
  }

  // The shell exits with raw wait status `status`; its terminal closes on its side.
  void end(uint64_t id, int status) {
    SpawnHandlers h;
    {
      std::lock_guard lock(mu_);
      Shell& s = shells_.at(id);
      if (s.ended) return;
      s.ended = true;
      s.slave.reset();
      h = s.handlers;
    }
    h.ended(SpawnEnd{true, status});
  }

  int slave(uint64_t id) {
    std::lock_guard lock(mu_);
    return shells_.at(id).slave.get();
  }
  void print(uint64_t id, std::string_view text) { write_all(slave(id), text); }
  // Keystrokes that reached the shell, waiting up to a few seconds for n bytes.
  std::string typed(uint64_t id, size_t n) {
    std::string got;
    const int fd = slave(id);
    const auto deadline = Clock::now() + 5s;
    while (got.size() < n && Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t r = ::read(fd, buf, sizeof buf);
      if (r > 0) got.append(buf, static_cast<size_t>(r));
    }
    return got;
  }
  std::vector<int> signals_to(uint64_t id) {
    std::lock_guard lock(mu_);
    std::vector<int> out;
    for (const auto& s : signals_)
      if (s.id == id) out.push_back(s.sig);
    return out;
  }

 private:
  struct Sent {
    std::string account;
    uint64_t id;
    int sig;
  };
  std::mutex mu_;
  uint64_t next_ = 0;
  std::map<uint64_t, Shell> shells_;
  std::vector<Sent> signals_;
};

// A client that keeps what it was given.
class Recorder {
 public:
  TerminalSink sink() {
    TerminalSink s;
    s.output = [this](std::string_view bytes) {
      std::lock_guard lock(mu_);
      EXPECT_FALSE(ended_) << "output after ended()";
      output_ += bytes;
      ++calls_;
    };
    s.ended = [this](const std::string& why) {
      std::lock_guard lock(mu_);
      EXPECT_FALSE(ended_) << "ended() twice";
      ended_ = true;
      why_ = why;
    };
    s.input_done = [this](size_t bytes) {
      std::lock_guard lock(mu_);
      input_done_ += bytes;
    };
    return s;
  }
  size_t input_done() {  // keystrokes reported taken (or dropped) after input() returned
    std::lock_guard lock(mu_);
    return input_done_;
  }
  std::string output() {
    std::lock_guard lock(mu_);
    return output_;
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  bool ended() {
    std::lock_guard lock(mu_);
    return ended_;
  }
  std::string why() {
    std::lock_guard lock(mu_);
    return why_;
  }
  bool saw(const std::string& text) {
    return eventually([&] { return output().find(text) != std::string::npos; });
  }

 private:
  std::mutex mu_;
  size_t input_done_ = 0;
  std::string output_, why_;
  int calls_ = 0;
  bool ended_ = false;
};

class TerminalsTest : public ::testing::Test {
 protected:
  void make(TerminalOptions opts = {}) { terminals_ = std::make_unique<Terminals>(loop_, port_, opts); }
  void TearDown() override {
    terminals_.reset();
    loop_.stop();
  }

  static BoxSpec spec(const std::string& account) {
    BoxSpec s;
    s.name = account;
    s.home_target = "/home/" + account;
    return s;
  }

  CreateOutcome create_outcome(const std::string& account) {
    std::promise<CreateOutcome> p;
    auto f = p.get_future();
    terminals_->create(spec(account), login_shell_request(spec(account), "/home/" + account),
                       [&p](CreateOutcome o) { p.set_value(std::move(o)); });
    EXPECT_EQ(f.wait_for(5s), std::future_status::ready);
    return f.get();
  }
  TerminalInfo create(const std::string& account, const std::string& chat) {
    std::promise<CreateOutcome> p;
    auto f = p.get_future();
    terminals_->create(spec(account), login_shell_request(spec(account), "/home/" + account), chat,
                       [&p](CreateOutcome o) { p.set_value(std::move(o)); });
    EXPECT_EQ(f.wait_for(5s), std::future_status::ready);
    CreateOutcome o = f.get();
    if (o.error) std::rethrow_exception(o.error);
    return *o.terminal;
  }
  std::optional<std::string> recent(const std::string& account, const std::string& id) {
    std::promise<std::optional<std::string>> p;
    auto f = p.get_future();
    terminals_->recent_output(account, id, [&p](std::optional<std::string> out) { p.set_value(std::move(out)); });
    EXPECT_EQ(f.wait_for(5s), std::future_status::ready);
    return f.get();
  }
  bool typed(const std::string& account, const std::string& id, std::string bytes) {
    std::promise<bool> p;
    auto f = p.get_future();
    terminals_->type(account, id, std::move(bytes), [&p](bool ok) { p.set_value(ok); });
    EXPECT_EQ(f.wait_for(5s), std::future_status::ready);
    return f.get();
  }
  TerminalInfo create(const std::string& account) {
    CreateOutcome o = create_outcome(account);
    if (o.error) std::rethrow_exception(o.error);
    return *o.terminal;
  }
  // The fake's id for the shell of terminal pid (pid = 100 + id).
  static uint64_t shell_of(const TerminalInfo& t) { return static_cast<uint64_t>(t.pid - 100); }

  bool removed(const std::string& account, const std::string& id, std::chrono::milliseconds limit = 5000ms) {
    std::promise<bool> p;
    auto f = p.get_future();
    terminals_->remove(account, id, [&p](bool found) { p.set_value(found); });
    if (f.wait_for(limit) != std::future_status::ready) {
      ADD_FAILURE() << "remove did not report";
      return false;
    }
    return f.get();
  }

  TerminalLoop loop_{"terminals-test"};
  PtyPort port_;
  std::unique_ptr<Terminals> terminals_;
};

TEST_F(TerminalsTest, TheLoginShellRequestIsTheAccountsShellWithATerminal) {
  BoxSpec s = spec("alice");
  s.shell = "/bin/zsh";
  SpawnRequest r = login_shell_request(s, "/home/alice/work", 120, 40);
  EXPECT_EQ(r.argv, (std::vector<std::string>{"/bin/zsh", "-l"}));
  EXPECT_EQ(r.cwd, "/home/alice/work");
  EXPECT_TRUE(r.tty);
  EXPECT_EQ(r.cols, 120);
  EXPECT_EQ(r.rows, 40);
  auto has = [&](const std::string& kv) { return std::find(r.env.begin(), r.env.end(), kv) != r.env.end(); };
  EXPECT_TRUE(has("TERM=xterm-256color"));
  EXPECT_TRUE(has("HOME=/home/alice"));
  EXPECT_TRUE(has("PWD=/home/alice/work"));
  EXPECT_TRUE(has("SHELL=/bin/zsh"));
}

TEST_F(TerminalsTest, OnlyItsAccountSeesAttachesToOrRemovesATerminal) {
  make();
  TerminalInfo t = create("alice");
  EXPECT_EQ(t.id.size(), 32u);
  EXPECT_NE(create("alice").id, t.id);
  ASSERT_EQ(terminals_->list("alice").size(), 2u);
  EXPECT_EQ(terminals_->list("alice")[0].id, t.id);  // oldest first
  EXPECT_TRUE(terminals_->list("bob").empty());
  EXPECT_FALSE(terminals_->get("bob", t.id));
  Recorder bob;
  EXPECT_EQ(terminals_->attach("bob", t.id, bob.sink()), nullptr);
  EXPECT_FALSE(removed("bob", t.id));
  EXPECT_TRUE(port_.signals_to(shell_of(t)).empty());
  // Control: alice's own calls reach it.
  ASSERT_TRUE(terminals_->get("alice", t.id));
  EXPECT_EQ(terminals_->get("alice", t.id)->pid, t.pid);
  Recorder alice;
  auto client = terminals_->attach("alice", t.id, alice.sink());
  ASSERT_NE(client, nullptr);
  port_.print(shell_of(t), "for alice");
  EXPECT_TRUE(alice.saw("for alice"));
  EXPECT_EQ(bob.output(), "");
}

TEST_F(TerminalsTest, AChatsTerminalIsListedFoundAttachedReadAndTypedIntoByItsChatOnly) {
  make();
  TerminalInfo a = create("alice", "chat-a");
  TerminalInfo b = create("alice", "chat-b");
  TerminalInfo none = create("alice");
  EXPECT_EQ(a.chat, "chat-a");
  ASSERT_EQ(terminals_->list("alice", "chat-a").size(), 1u);
  EXPECT_EQ(terminals_->list("alice", "chat-a")[0].id, a.id);
  EXPECT_EQ(terminals_->list("alice", "").size(), 3u);  // no chat named: all of them
  EXPECT_TRUE(terminals_->list("bob", "chat-a").empty());

  // Made in the chat is not enough: the user must have it attached.
  EXPECT_FALSE(terminals_->attached_in_chat("alice", "chat-a"));
  Recorder ra, rb, rn;
  auto ca = terminals_->attach("alice", a.id, ra.sink());
  auto cb = terminals_->attach("alice", b.id, rb.sink());
  auto cn = terminals_->attach("alice", none.id, rn.sink());
  ASSERT_TRUE(terminals_->attached_in_chat("alice", "chat-a"));
  EXPECT_EQ(terminals_->attached_in_chat("alice", "chat-a")->id, a.id);
  EXPECT_EQ(terminals_->attached_in_chat("alice", "chat-b")->id, b.id);
  EXPECT_FALSE(terminals_->attached_in_chat("alice", ""));  // no chat: none, not the chatless one
  EXPECT_FALSE(terminals_->attached_in_chat("bob", "chat-a"));

  port_.print(shell_of(a), "\x1b[32mName? \x1b[0m");
  ASSERT_TRUE(ra.saw("Name? "));
  EXPECT_EQ(recent("alice", a.id), "\x1b[32mName? \x1b[0m");
  EXPECT_FALSE(recent("bob", a.id));
  EXPECT_TRUE(typed("alice", a.id, "Ada\r"));
  EXPECT_EQ(port_.typed(shell_of(a), 4), "Ada\r");
  EXPECT_FALSE(typed("bob", a.id, "x"));

  // The last to attach is the one reached; when it leaves, the one still attached.
  TerminalInfo a2 = create("alice", "chat-a");
  Recorder ra2;
  auto ca2 = terminals_->attach("alice", a2.id, ra2.sink());
  EXPECT_EQ(terminals_->attached_in_chat("alice", "chat-a")->id, a2.id);
  ca2->detach();
  EXPECT_EQ(terminals_->attached_in_chat("alice", "chat-a")->id, a.id);
  ca.reset();
  EXPECT_FALSE(terminals_->attached_in_chat("alice", "chat-a"));
  // An ended terminal is neither read nor typed into.
  port_.end(shell_of(b), 0);
  ASSERT_TRUE(eventually([&] { return !terminals_->attached_in_chat("alice", "chat-b"); }));
  EXPECT_FALSE(recent("alice", b.id));
  EXPECT_FALSE(typed("alice", b.id, "x"));
}

TEST_F(TerminalsTest, AnAccountAtItsCapIsRefusedUntilOneEnds) {
  make({.max_per_account = 2});
  TerminalInfo a = create("alice");
  create("alice");
  EXPECT_THROW(terminals_->create(spec("alice"), {}, [](CreateOutcome) { ADD_FAILURE() << "created over the cap"; }),
               TerminalLimitError);
  create("bob");  // the cap is per account
  // A shell that could not start gives its place back...
  port_.fail_next = true;
  EXPECT_THROW(create("bob"), SpawnError);
  create("bob");
  // ...and so does one that ended.
  port_.end(shell_of(a), 0);
  ASSERT_TRUE(eventually([&] { return terminals_->list("alice").size() == 1; }));
  create("alice");
  EXPECT_THROW(create("alice"), TerminalLimitError);
}

TEST_F(TerminalsTest, OutputReachesEveryClientAndKeystrokesAndResizesReachThePty) {
  make();
  TerminalInfo t = create("alice");
  Recorder one, two;
  auto c1 = terminals_->attach("alice", t.id, one.sink());
  auto c2 = terminals_->attach("alice", t.id, two.sink());
  port_.print(shell_of(t), "$ prompt");
  EXPECT_TRUE(one.saw("$ prompt"));
  EXPECT_TRUE(two.saw("$ prompt"));

  // From a thread other than the loop's, keystrokes are handed over: each client hears back
  // about all of its own, once the pty took them.
  const size_t now1 = c1->input("ls -l\r");
  const size_t now2 = c2->input("\x03");
  EXPECT_EQ(port_.typed(shell_of(t), 7), "ls -l\r\x03");
  EXPECT_TRUE(eventually([&] { return now1 + one.input_done() == 6 && now2 + two.input_done() == 1; }));
  // On the loop (a WebSocket's own thread), a pty with room takes them at once: nothing to
  // hear back about.
  std::promise<size_t> taken_at_once;
  terminals_->loop().post([&] { taken_at_once.set_value(c1->input("q")); });
  EXPECT_EQ(taken_at_once.get_future().get(), 1u);
  EXPECT_EQ(port_.typed(shell_of(t), 1), "q");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(one.input_done(), 6 - now1);

  c2->resize(132, 43);
  EXPECT_TRUE(eventually([&] {
    winsize ws{};
    ::ioctl(port_.slave(shell_of(t)), TIOCGWINSZ, &ws);
    return ws.ws_col == 132 && ws.ws_row == 43;
  }));

  // A client that detaches gets nothing more; the other still does.
  c2->detach();
  const std::string before = two.output();
  port_.print(shell_of(t), "after");
  EXPECT_TRUE(one.saw("after"));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(two.output(), before);
  c2.reset();  // dropping a client's handle detaches it too
  c1.reset();
  port_.print(shell_of(t), "unseen");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(one.output().find("unseen"), std::string::npos);
  EXPECT_TRUE(terminals_->get("alice", t.id));  // no client is no reason to end
}

TEST_F(TerminalsTest, AClientAttachingLaterGetsTheNewestOutputThenLiveOutput) {
  make({.replay_bytes = 1024});
  TerminalInfo t = create("alice");
  Recorder first;
  auto c1 = terminals_->attach("alice", t.id, first.sink());
  std::string all;
  for (int i = 0; all.size() < 5000; ++i) all += "line " + std::to_string(i) + "\r\n";
  port_.print(shell_of(t), all);
  ASSERT_TRUE(eventually([&] { return first.output().size() == all.size(); }));
  EXPECT_EQ(first.output(), all);
  c1.reset();

  Recorder later;
  auto c2 = terminals_->attach("alice", t.id, later.sink());
  ASSERT_TRUE(eventually([&] { return later.calls() >= 1; }));
  EXPECT_EQ(later.output(), all.substr(all.size() - 1024));  // the replay: bounded, the newest
  port_.print(shell_of(t), "live");
  EXPECT_TRUE(later.saw("live"));
  EXPECT_EQ(later.output(), all.substr(all.size() - 1024) + "live");
}

TEST_F(TerminalsTest, AShellThatExitsEndsItsTerminalAfterItsLastOutput) {
  make();
  TerminalInfo t = create("alice");
  Recorder r;
  auto c = terminals_->attach("alice", t.id, r.sink());
  ASSERT_TRUE(eventually([&] { return terminals_->list("alice").size() == 1; }));
  port_.print(shell_of(t), "last words");
  port_.end(shell_of(t), 3 << 8);  // at once: what it printed is still read and shown first
  ASSERT_TRUE(eventually([&] { return r.ended(); }));
  EXPECT_EQ(r.output(), "last words");
  EXPECT_EQ(r.why(), "terminal ended: the shell exited with status 3");
  EXPECT_FALSE(terminals_->get("alice", t.id));
  EXPECT_TRUE(terminals_->list("alice").empty());
  Recorder late;
  EXPECT_EQ(terminals_->attach("alice", t.id, late.sink()), nullptr);
  EXPECT_TRUE(port_.signals_to(shell_of(t)).empty());  // it ended by itself
  EXPECT_EQ(c->input("x"), 1u);                        // keystrokes to an ended terminal are dropped at once, not held
}

TEST_F(TerminalsTest, RemoveHangsUpTheSessionThenKillsWhatIgnoresIt) {
  make({.kill_grace = 200ms});
  TerminalInfo bash_like = create("alice");
  Recorder r;
  auto c = terminals_->attach("alice", bash_like.id, r.sink());
  EXPECT_TRUE(removed("alice", bash_like.id, 150ms));  // SIGHUP ends it: no waiting for a grace
  // Then SIGKILL to the rest of its session (a nohup'd job outlives the shell's hangup), sent
  // before remove() reported.
  EXPECT_EQ(port_.signals_to(shell_of(bash_like)), (std::vector<int>{SIGHUP, SIGKILL}));
  ASSERT_TRUE(eventually([&] { return r.ended(); }));
  EXPECT_EQ(r.why(), "terminal ended: deleted");
  EXPECT_FALSE(terminals_->get("alice", bash_like.id));
  EXPECT_FALSE(removed("alice", bash_like.id));

  port_.hup_ends_shell = false;  // it ignores SIGHUP
  TerminalInfo stubborn = create("alice");
  const auto start = Clock::now();
  EXPECT_TRUE(removed("alice", stubborn.id));
  EXPECT_GE(Clock::now() - start, 200ms);
  EXPECT_EQ(port_.signals_to(shell_of(stubborn)), (std::vector<int>{SIGHUP, SIGKILL}));
  EXPECT_FALSE(terminals_->get("alice", stubborn.id));  // gone from the listing at once
}

TEST_F(TerminalsTest, ATerminalWithNoClientAndNoOutputEndsAfterTheIdleTimeout) {
  make({.idle_timeout = 300ms, .kill_grace = 100ms});
  TerminalInfo idle = create("alice");
  TerminalInfo watched = create("alice");
  TerminalInfo chatty = create("alice");
  Recorder r;
  auto c = terminals_->attach("alice", watched.id, r.sink());
  // chatty prints every 100 ms, with nobody attached: output is activity too.
  std::jthread printer([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      port_.print(shell_of(chatty), ".");
      std::this_thread::sleep_for(100ms);
    }
  });
  ASSERT_TRUE(eventually([&] { return !terminals_->get("alice", idle.id); }, 3000ms));
  EXPECT_TRUE(eventually([&] { return port_.signals_to(shell_of(idle)) == std::vector<int>{SIGHUP, SIGKILL}; }));
  std::this_thread::sleep_for(600ms);  // twice the timeout past the idle one's end
  EXPECT_TRUE(terminals_->get("alice", watched.id));
  EXPECT_TRUE(terminals_->get("alice", chatty.id));
  printer.request_stop();
  printer.join();
  // Once its last client leaves, the watched one's idle time starts.
  c.reset();
  EXPECT_TRUE(eventually([&] { return !terminals_->get("alice", watched.id); }, 3000ms));
  EXPECT_TRUE(eventually([&] { return !terminals_->get("alice", chatty.id); }, 3000ms));
}

TEST_F(TerminalsTest, NothingReachesASinkAfterShutDown) {
  make();
  TerminalInfo t = create("alice");
  Recorder r;
  auto c = terminals_->attach("alice", t.id, r.sink());
  port_.print(shell_of(t), "before");
  ASSERT_TRUE(r.saw("before"));
  terminals_->shut_down();
  try {
    port_.print(shell_of(t), "after");
  } catch (const std::exception&) {
    // EIO: shut_down() closes the pty master (on its strand, maybe already), and a shell that
    // writes to a terminal whose master is gone gets that error.
  }
  port_.end(shell_of(t), 0);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(r.output(), "before");
  EXPECT_FALSE(r.ended());
  EXPECT_TRUE(terminals_->list("alice").empty());
}

}  // namespace
}  // namespace agentbox::exec
