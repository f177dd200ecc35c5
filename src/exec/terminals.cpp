#include "exec/terminals.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

#include "exec/replay_buffer.hpp"
#include "util/error.hpp"
#include "util/random_hex.hpp"
#include "util/shutdown_guard.hpp"
#include "util/unhandled.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::exec {

using Clock = TerminalLoop::Clock;

namespace {

constexpr size_t kReadBuffer = 64 << 10;
constexpr int kReadsPerWakeup = 4;  // then the other terminals get their turn
constexpr size_t kIdBytes = 16;     // 128 random bits: ids are not guessable

// 32 hex digits from the kernel's CSPRNG.
std::string new_terminal_id() { return random_hex(kIdBytes); }

// Open Terminal's created_at: Python's datetime.utcnow().isoformat() + "Z".
std::string iso_utc_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  std::tm utc{};
  ::gmtime_r(&ts.tv_sec, &utc);
  char stamp[40];
  const size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(stamp + n, sizeof stamp - n, ".%06ldZ", ts.tv_nsec / 1000);
  return stamp;
}

std::string exit_reason(const SpawnEnd& end) {
  if (!end.exited) return "terminal ended: its box stopped";
  if (WIFSIGNALED(end.status))
    return "terminal ended: the shell was killed by signal " + std::to_string(WTERMSIG(end.status));
  return "terminal ended: the shell exited with status " + std::to_string(WEXITSTATUS(end.status));
}

}  // namespace

TerminalLimitError::TerminalLimitError(size_t limit)
    : Error("Too many terminals: this account may have " + std::to_string(limit) + " open at once; close one first"),
      limit_(limit) {}

struct Terminals::Impl : std::enable_shared_from_this<Terminals::Impl> {
  class Client;

  // Keystrokes the pty did not take at once, and whom to tell once it has.
  struct Input {
    std::string bytes;
    std::weak_ptr<Client> from;
  };

  // One terminal. Which thread may touch what is said per group.
  struct Term {
    explicit Term(size_t replay_bytes) : replay(replay_bytes) {}

    // Set before the terminal is published, then constant.
    std::string id, account, created_at;
    std::string chat;  // the chat it was made for, "" for none
    uint64_t seq = 0;  // creation order, for listings
    pid_t pid = 0;
    uint64_t spawn = 0;  // the box's id for the shell: what signals name

    // The loop's thread only.
    UniqueFd pty;                         // the master: output read, keystrokes written
    TerminalLoop::WatchId pty_watch = 0;  // 0: not watched (not yet, or at its end)
    bool pty_eof = false;
    ReplayBuffer replay;
    std::vector<std::weak_ptr<Client>> clients;
    std::deque<Input> input;
    size_t input_bytes = 0;
    size_t written_of_front = 0;  // of input.front(), taken by the pty already
    bool writing = false;         // input waits for the pty to be writable
    Clock::time_point last_activity = Clock::now();
    TerminalLoop::TimerId idle_timer = 0, kill_timer = 0;
    bool shell_ended = false;                        // its spawn's end was reported
    bool closed = false;                             // out of the registry; clients told; being or been killed
    int kill_stage = 0;                              // 0: nothing sent, 1: SIGHUP sent, 2: SIGKILL sent
    std::vector<std::function<void(bool)>> removed;  // remove() callers waiting for the end

    // Impl::mu only: clients attached now, and when the last one came (Impl::next_attach).
    size_t attached = 0;
    uint64_t attach_seq = 0;
  };

  // A client's handle. The terminal holds it weakly, so the client's owner decides its life.
  class Client : public TerminalClient, public std::enable_shared_from_this<Client> {
   public:
    Client(std::weak_ptr<Impl> impl, std::shared_ptr<Term> term, TerminalSink sink)
        : impl_(std::move(impl)), term_(term), sink_(std::make_shared<TerminalSink>(std::move(sink))) {}
    ~Client() override { detach(); }

    size_t input(std::string_view bytes) override {
      auto impl = impl_.lock();
      auto term = term_.lock();
      if (!impl || !term || detached()) return bytes.size();  // nobody to type to: dropped
      if (impl->loop.on_loop_thread()) {
        size_t done = bytes.size();  // dropped, unless the terminals are still serving
        impl->guard.run([&] { done = impl->queue_input(term, weak_from_this(), bytes); });
        return done;
      }
      impl->post([impl = impl.get(), term, from = weak_from_this(), bytes = std::string(bytes)] {
        const size_t done = impl->queue_input(term, from, bytes);
        if (auto c = from.lock(); c && done) c->input_done(done);
      });
      return 0;
    }

    void resize(uint16_t cols, uint16_t rows) override {
      if (cols == 0 || rows == 0) return;
      auto impl = impl_.lock();
      auto term = term_.lock();
      if (!impl || !term) return;
      impl->dispatch([term, cols, rows] {
        if (!term->pty) return;
        winsize ws{};
        ws.ws_col = cols;
        ws.ws_row = rows;
        ::ioctl(term->pty.get(), TIOCSWINSZ, &ws);  // the kernel sends SIGWINCH
      });
    }

    void detach() override {
      {
        std::lock_guard lock(mu_);
        if (detached_) return;
        detached_ = true;
        sink_.reset();
      }
      gone();
      // The idle clock starts when the last client leaves. Posted, not run here: a sink may
      // detach from within its output(), while the terminal goes through its clients.
      auto impl = impl_.lock();
      auto term = term_.lock();
      if (impl && term) impl->post([impl = impl.get(), term] { impl->prune_clients(*term); });
    }

    // The loop's thread only. The sink is taken under the lock and called outside it, so that
    // no call starts after detach() returns, and a sink may detach (or end) from within.
    void output(std::string_view bytes) {
      if (auto sink = current_sink(); sink && sink->output) sink->output(bytes);
    }
    void input_done(size_t bytes) {
      if (auto sink = current_sink(); sink && sink->input_done) sink->input_done(bytes);
    }
    void ended(const std::string& why) {
      std::shared_ptr<TerminalSink> sink;
      bool was_attached = false;
      {
        std::lock_guard lock(mu_);
        sink = std::move(sink_);
        sink_.reset();
        was_attached = !detached_;
        detached_ = true;
      }
      if (was_attached) gone();
      if (sink && sink->ended) sink->ended(why);
    }
    bool detached() {
      std::lock_guard lock(mu_);
      return detached_;
    }

   private:
    void gone() {  // no longer attached: one fewer for attached_in_chat(); once per client
      auto impl = impl_.lock();
      auto term = term_.lock();
      if (!impl || !term) return;
      std::lock_guard lock(impl->mu);
      if (term->attached > 0) --term->attached;
    }

    std::shared_ptr<TerminalSink> current_sink() {
      std::lock_guard lock(mu_);
      return sink_;
    }

    std::weak_ptr<Impl> impl_;
    std::weak_ptr<Term> term_;
    std::mutex mu_;  // guards sink_ and detached_
    std::shared_ptr<TerminalSink> sink_;
    bool detached_ = false;
  };

  Impl(TerminalLoop& l, TerminalSpawner& b, TerminalOptions o) : loop(l), boxes(b), opts(o) {}

  // Nothing below touches boxes or a sink after this returns; handlers still queued find
  // the guard closed and do nothing, and the terminals' descriptors are closed.
  void shut_down() {
    guard.close();  // waits for the handlers at work
    std::vector<std::shared_ptr<Term>> all;
    {
      std::lock_guard lock(mu);
      for (auto& [id, t] : terms) all.push_back(t);
      terms.clear();
    }
    for (auto& t : all)
      loop.post([this, self = shared_from_this(), t] {
        stop_reading(*t);
        t->pty.reset();
        loop.cancel(t->idle_timer);
        loop.cancel(t->kill_timer);
        t->clients.clear();
        t->input.clear();
        t->removed.clear();
      });
  }

  // Runs fn on the loop, guarded, with this kept alive meanwhile.
  template <class Fn>
  void post(Fn fn) {
    loop.post([self = shared_from_this(), fn = std::move(fn)]() mutable { self->guard.run(fn); });
  }
  // The same, at once when already on the loop (a resize from a WebSocket).
  template <class Fn>
  void dispatch(Fn fn) {
    if (!loop.on_loop_thread()) return post(std::move(fn));
    guard.run(fn);
  }
  // fn at `at` on the loop, guarded; a timer id for loop.cancel().
  template <class Fn>
  TerminalLoop::TimerId timer(Clock::time_point at, Fn fn) {
    return loop.at(at, [self = shared_from_this(), fn = std::move(fn)]() mutable { self->guard.run(fn); });
  }

  // A caller's callback: what it throws is reported (util/unhandled.hpp), never the loop's.
  template <class Fn, class... Args>
  static void call_quietly(Fn& fn, Args&&... args) {
    call_reporting("terminals callback", fn, std::forward<Args>(args)...);
  }

  // ---- slots per account -------------------------------------------------------------------

  void reserve(const std::string& account) {
    std::lock_guard lock(mu);
    size_t& n = per_account[account];
    if (n >= opts.max_per_account) throw TerminalLimitError(opts.max_per_account);
    ++n;
  }

  void release_locked(const std::string& account) {
    auto it = per_account.find(account);
    if (it == per_account.end()) return;
    if (--it->second == 0) per_account.erase(it);
  }

  // ---- the loop's thread ---------------------------------------------------------------------

  void started(const std::shared_ptr<Term>& t, SpawnResult spawned, const std::function<void(CreateOutcome)>& done) {
    t->spawn = spawned.id;
    t->pid = spawned.pid;
    try {
      if (!spawned.pty_master) throw Error("spawn: no terminal for the shell");
      const int fd = spawned.pty_master.get();
      const int flags = ::fcntl(fd, F_GETFL);
      check(flags, "fcntl(F_GETFL)");
      check(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(F_SETFL, O_NONBLOCK)");
      check(::fcntl(fd, F_SETFD, FD_CLOEXEC), "fcntl(F_SETFD, FD_CLOEXEC)");
      t->pty_watch = loop.watch(fd, EPOLLIN, [this, t](uint32_t events) { on_pty_ready(t, events); });
      t->pty = std::move(spawned.pty_master);
    } catch (...) {
      // Never published: nobody could ever see or end it.
      boxes.signal_session(t->account, t->spawn, SIGKILL, [](bool) {});
      {
        std::lock_guard lock(mu);
        release_locked(t->account);
      }
      t->closed = true;
      call_quietly(done, CreateOutcome{std::nullopt, std::current_exception()});
      return;
    }
    {
      std::lock_guard lock(mu);
      t->seq = ++next_seq;
      terms[t->id] = t;
    }
    t->last_activity = Clock::now();
    arm_idle(t, t->last_activity + opts.idle_timeout);
    call_quietly(done, CreateOutcome{TerminalInfo{t->id, t->created_at, t->pid, t->chat}, nullptr});
  }

  // The pty is readable (or hung up), or writable again for keystrokes that waited.
  void on_pty_ready(const std::shared_ptr<Term>& t, uint32_t events) {
    guard.run([&] {
      if (!t->pty) return;
      if ((events & EPOLLOUT) && t->writing) write_next(t);
      if (!t->pty || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
      if (read_available(t)) {
        t->pty_eof = true;  // no process holds the terminal; the shell's end follows
        stop_reading(*t);
        drop_input(*t);
      }
    });
  }

  void stop_reading(Term& t) {
    if (t.pty_watch) loop.unwatch(t.pty_watch);
    t.pty_watch = 0;
  }

  // Reads what the pty has now and hands it out; true at EOF (a pty master answers EIO once no
  // process holds the terminal). At most kReadsPerWakeup reads, then the loop's other work.
  bool read_available(const std::shared_ptr<Term>& t) {
    thread_local std::vector<char> buf(kReadBuffer);
    for (int k = 0; k < kReadsPerWakeup; ++k) {
      const ssize_t n = ::read(t->pty.get(), buf.data(), buf.size());
      if (n > 0) {
        deliver(*t, std::string_view(buf.data(), static_cast<size_t>(n)));
        if (static_cast<size_t>(n) < buf.size()) return false;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
      return true;  // 0, EIO, or an error that will not go away
    }
    return false;
  }

  void deliver(Term& t, std::string_view bytes) {
    t.replay.append(bytes);
    t.last_activity = Clock::now();
    bool gone = false;
    // By index: a sink may attach another client meanwhile (never remove one: detach posts).
    for (size_t i = 0; i < t.clients.size(); ++i) {
      auto c = t.clients[i].lock();
      if (!c) {
        gone = true;
        continue;
      }
      c->output(bytes);
    }
    if (gone) prune_clients(t);
  }

  void prune_clients(Term& t) {
    const size_t before = t.clients.size();
    std::erase_if(t.clients, [](const std::weak_ptr<Client>& weak) {
      auto c = weak.lock();
      return !c || c->detached();
    });
    if (t.clients.size() < before) t.last_activity = Clock::now();
  }

  void attach_on_loop(const std::shared_ptr<Term>& t, const std::shared_ptr<Client>& c) {
    if (t->closed) {
      c->ended("terminal ended");
      return;
    }
    // Replay, then live: both on the loop, so nothing is shown twice or skipped.
    const std::string replay = t->replay.contents();
    if (!replay.empty()) c->output(replay);
    t->clients.push_back(c);
    t->last_activity = Clock::now();
  }

  // Checks at the deadline whether the terminal has been idle for the whole timeout: no
  // client attached, no output, no keystrokes. Otherwise looks again when it could be.
  void arm_idle(const std::shared_ptr<Term>& t, Clock::time_point at) {
    t->idle_timer = timer(at, [this, t] {
      t->idle_timer = 0;
      if (t->closed) return;
      prune_clients(*t);
      const auto now = Clock::now();
      if (!t->clients.empty()) return arm_idle(t, now + opts.idle_timeout);
      if (now - t->last_activity >= opts.idle_timeout)
        return close(t, "terminal ended: idle with no client attached", /*kill=*/true);
      arm_idle(t, t->last_activity + opts.idle_timeout);
    });
  }

  // Writes what the pty takes now, unless keystrokes wait already (order); the rest waits for
  // the pty to be writable. Returns the bytes done with now: taken, or dropped.
  size_t queue_input(const std::shared_ptr<Term>& t, std::weak_ptr<Client> from, std::string_view bytes) {
    if (!t->pty || t->closed || t->pty_eof || t->input_bytes + bytes.size() > opts.input_queue_bytes)
      return bytes.size();
    t->last_activity = Clock::now();
    size_t taken = 0;
    if (t->input.empty()) {
      const ssize_t n = write_pty(*t, bytes);
      if (n < 0) return bytes.size();  // the terminal is gone
      taken = static_cast<size_t>(n);
      if (taken == bytes.size()) return taken;
    }
    t->input_bytes += bytes.size() - taken;
    t->input.push_back({std::string(bytes.substr(taken)), std::move(from)});
    want_writable(*t, true);
    return taken;
  }

  // What the pty takes of bytes now (EAGAIN: less, maybe 0); -1 once it is gone.
  static ssize_t write_pty(Term& t, std::string_view bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(t.pty.get(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) return -1;
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
  }

  // The pty is writable again: what waits goes on, each piece reported to its client once the
  // pty has taken all of it.
  void write_next(const std::shared_ptr<Term>& t) {
    while (!t->input.empty() && t->pty) {
      Input& front = t->input.front();
      const std::string_view rest = std::string_view(front.bytes).substr(t->written_of_front);
      const ssize_t n = write_pty(*t, rest);
      if (n < 0) return drop_input(*t);  // the terminal is gone
      t->written_of_front += static_cast<size_t>(n);
      if (static_cast<size_t>(n) < rest.size()) break;  // the pty is full again
      Input done = std::move(front);
      t->input.pop_front();
      t->written_of_front = 0;
      t->input_bytes -= done.bytes.size();
      report_input_done(done);
    }
    want_writable(*t, !t->input.empty() && t->pty);
  }

  // EPOLLOUT on the pty while keystrokes wait.
  void want_writable(Term& t, bool waiting) {
    if (waiting != t.writing && t.pty_watch) loop.modify(t.pty_watch, waiting ? EPOLLIN | EPOLLOUT : EPOLLIN);
    t.writing = waiting;
  }

  static void report_input_done(const Input& piece) {
    auto c = piece.from.lock();
    if (!c) return;
    try {
      c->input_done(piece.bytes.size());
    } catch (...) {
      // A client's callback must not take the loop down (as call_quietly; a lambda has no bool).
    }
  }

  void drop_input(Term& t) {
    auto input = std::move(t.input);
    t.input.clear();
    t.input_bytes = 0;
    t.written_of_front = 0;
    want_writable(t, false);
    for (auto& piece : input) report_input_done(piece);
  }

  // Its box reported the shell's end (tagged with its spawn id, so it is this shell's).
  void handle_end(const std::shared_ptr<Term>& t, SpawnEnd end) {
    if (t->shell_ended) return;
    t->shell_ended = true;
    loop.cancel(t->kill_timer);
    t->kill_timer = 0;
    if (t->pty && !t->pty_eof) read_available(t);  // what it printed last
    if (!t->closed) close(t, exit_reason(end), /*kill=*/false);
    if (t->kill_stage == 1) {
      // The hangup ended the shell; what of its session ignored it (nohup, a trap) is killed
      // now, and remove() answers once that was done.
      t->kill_stage = 2;
      auto self = shared_from_this();
      boxes.signal_session(t->account, t->spawn, SIGKILL, [self, t](bool) { self->post([t] { finish_removal(*t); }); });
      return;
    }
    finish_removal(*t);
  }

  // Out of the registry, clients told why, the pty closed; with kill, the shell's session is
  // ended: SIGHUP (the shell passes it to its jobs, editors save), SIGKILL if it is still there
  // after kill_grace.
  void close(const std::shared_ptr<Term>& t, const std::string& why, bool kill) {
    if (t->closed) return;
    t->closed = true;
    {
      std::lock_guard lock(mu);
      if (auto it = terms.find(t->id); it != terms.end() && it->second == t) terms.erase(it);
      release_locked(t->account);
    }
    auto clients = std::move(t->clients);
    t->clients.clear();
    for (auto& weak : clients)
      if (auto c = weak.lock()) c->ended(why);
    loop.cancel(t->idle_timer);
    t->idle_timer = 0;
    drop_input(*t);
    stop_reading(*t);
    t->pty.reset();  // a hangup for the shell's foreground job too
    if (kill && !t->shell_ended) {
      t->kill_stage = 1;
      boxes.signal_session(t->account, t->spawn, SIGHUP, [](bool) {});
      arm_kill_timer(t);
    }
  }

  void arm_kill_timer(const std::shared_ptr<Term>& t) {
    t->kill_timer = timer(Clock::now() + opts.kill_grace, [this, t] {
      t->kill_timer = 0;
      if (t->shell_ended) return;
      if (t->kill_stage == 1) {
        t->kill_stage = 2;
        boxes.signal_session(t->account, t->spawn, SIGKILL, [](bool) {});
        arm_kill_timer(t);
      } else {
        finish_removal(*t);  // not even KILL brought an exit (box unreachable): stay bounded
      }
    });
  }

  static void finish_removal(Term& t) {
    auto removed = std::move(t.removed);
    t.removed.clear();
    for (auto& done : removed) call_quietly(done, true);
  }

  // ---- any thread --------------------------------------------------------------------------

  std::shared_ptr<Term> find(const std::string& account, const std::string& id) const {
    std::lock_guard lock(mu);
    auto it = terms.find(id);
    if (it == terms.end() || it->second->account != account) return nullptr;
    return it->second;
  }

  void create(const BoxSpec& spec, SpawnRequest req, std::string chat, std::function<void(CreateOutcome)> done) {
    reserve(spec.name);
    std::shared_ptr<Term> t;
    try {
      t = std::make_shared<Term>(opts.replay_bytes);
      t->id = new_terminal_id();
      t->account = spec.name;
      t->chat = std::move(chat);
      t->created_at = iso_utc_now();
    } catch (...) {
      std::lock_guard lock(mu);
      release_locked(spec.name);
      throw;
    }

    // The box calls these on its own strand; the terminal's work moves to the loop.
    auto self = shared_from_this();
    SpawnHandlers h;
    h.started = [self, t, done](SpawnResult r) {
      auto result = std::make_shared<SpawnResult>(std::move(r));
      self->post([self, t, result, done] { self->started(t, std::move(*result), done); });
    };
    h.failed = [self, t, done](std::exception_ptr error) {
      {
        std::lock_guard lock(self->mu);
        self->release_locked(t->account);
      }
      call_quietly(done, CreateOutcome{std::nullopt, error});
    };
    h.ended = [self, t](SpawnEnd end) { self->post([self, t, end] { self->handle_end(t, end); }); };
    req.tty = true;
    try {
      boxes.spawn_terminal(spec, std::move(req), std::move(h));
    } catch (...) {
      std::lock_guard lock(mu);
      release_locked(spec.name);
      throw;
    }
  }

  TerminalLoop& loop;
  TerminalSpawner& boxes;
  const TerminalOptions opts;

  ShutdownGuard guard{"terminals"};  // every handler runs through it; closed by shut_down()

  mutable std::mutex mu;                                // guards what follows
  std::map<std::string, std::shared_ptr<Term>> terms;   // open terminals by id
  std::unordered_map<std::string, size_t> per_account;  // open and opening, by account
  uint64_t next_seq = 0;
  uint64_t next_attach = 0;
};

Terminals::Terminals(TerminalLoop& loop, TerminalSpawner& boxes, TerminalOptions options)
    : impl_(std::make_shared<Impl>(loop, boxes, options)) {}

Terminals::~Terminals() { shut_down(); }

void Terminals::shut_down() { impl_->shut_down(); }

void Terminals::create(const BoxSpec& spec, SpawnRequest req, std::function<void(CreateOutcome)> done) {
  impl_->create(spec, std::move(req), {}, std::move(done));
}

void Terminals::create(const BoxSpec& spec, SpawnRequest req, std::string chat,
                       std::function<void(CreateOutcome)> done) {
  impl_->create(spec, std::move(req), std::move(chat), std::move(done));
}

std::vector<TerminalInfo> Terminals::list(const std::string& account) const { return list(account, {}); }

std::vector<TerminalInfo> Terminals::list(const std::string& account, const std::string& chat) const {
  std::vector<std::pair<uint64_t, TerminalInfo>> found;
  {
    std::lock_guard lock(impl_->mu);
    for (const auto& [id, t] : impl_->terms)
      if (t->account == account && (chat.empty() || t->chat == chat))
        found.emplace_back(t->seq, TerminalInfo{t->id, t->created_at, t->pid, t->chat});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<TerminalInfo> out;
  out.reserve(found.size());
  for (auto& [seq, info] : found) out.push_back(std::move(info));
  return out;
}

std::optional<TerminalInfo> Terminals::get(const std::string& account, const std::string& id) const {
  auto t = impl_->find(account, id);
  if (!t) return std::nullopt;
  return TerminalInfo{t->id, t->created_at, t->pid, t->chat};
}

std::optional<TerminalInfo> Terminals::attached_in_chat(const std::string& account, const std::string& chat) const {
  if (chat.empty()) return std::nullopt;
  std::lock_guard lock(impl_->mu);
  const Impl::Term* best = nullptr;
  for (const auto& [id, t] : impl_->terms)
    if (t->account == account && t->chat == chat && t->attached > 0 && (!best || t->attach_seq > best->attach_seq))
      best = t.get();
  if (!best) return std::nullopt;
  return TerminalInfo{best->id, best->created_at, best->pid, best->chat};
}

void Terminals::recent_output(const std::string& account, const std::string& id,
                              std::function<void(std::optional<std::string>)> done) {
  auto t = impl_->find(account, id);
  if (!t) return Impl::call_quietly(done, std::nullopt);
  impl_->post([t, done = std::move(done)]() mutable {
    if (t->closed) return Impl::call_quietly(done, std::nullopt);
    Impl::call_quietly(done, t->replay.contents());
  });
}

void Terminals::type(const std::string& account, const std::string& id, std::string bytes,
                     std::function<void(bool)> done) {
  auto t = impl_->find(account, id);
  if (!t) return Impl::call_quietly(done, false);
  Impl& im = *impl_;
  im.post([&im, t, bytes = std::move(bytes), done = std::move(done)]() mutable {
    const bool open = t->pty && !t->closed && !t->pty_eof && t->input_bytes + bytes.size() <= im.opts.input_queue_bytes;
    if (open) im.queue_input(t, {}, bytes);
    Impl::call_quietly(done, open);
  });
}

void Terminals::remove(const std::string& account, const std::string& id, std::function<void(bool)> done) {
  auto t = impl_->find(account, id);
  if (!t) return Impl::call_quietly(done, false);
  Impl& im = *impl_;
  im.post([&im, t, done = std::move(done)]() mutable {
    if (t->shell_ended) return Impl::call_quietly(done, true);
    t->removed.push_back(std::move(done));
    im.close(t, "terminal ended: deleted", /*kill=*/true);
  });
}

std::shared_ptr<TerminalClient> Terminals::attach(const std::string& account, const std::string& id,
                                                  TerminalSink sink) {
  auto t = impl_->find(account, id);
  if (!t) return nullptr;
  auto c = std::make_shared<Impl::Client>(impl_, t, std::move(sink));
  {
    std::lock_guard lock(impl_->mu);
    ++t->attached;
    t->attach_seq = ++impl_->next_attach;
  }
  Impl& im = *impl_;
  im.post([&im, t, c] { im.attach_on_loop(t, c); });
  return c;
}

TerminalLoop& Terminals::loop() const { return impl_->loop; }

size_t Terminals::count() const {
  std::lock_guard lock(impl_->mu);
  return impl_->terms.size();
}

}  // namespace agentbox::exec
