#include "exec/terminals.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "box/box_env.hpp"
#include "exec/replay_buffer.hpp"
#include "util/error.hpp"
#include "util/random_hex.hpp"

namespace agentbox::exec {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using Descriptor = asio::posix::stream_descriptor;
using Strand = asio::strand<asio::io_context::executor_type>;

namespace {

constexpr size_t kReadBuffer = 64 << 10;
constexpr int kReadsPerWakeup = 4;  // then the account's other terminals and answers get their turn
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
  if (WIFSIGNALED(end.status)) return "terminal ended: the shell was killed by signal " + std::to_string(WTERMSIG(end.status));
  return "terminal ended: the shell exited with status " + std::to_string(WEXITSTATUS(end.status));
}

}  // namespace

TerminalLimitError::TerminalLimitError(size_t limit)
    : std::runtime_error("Too many terminals: this account may have " + std::to_string(limit) +
                         " open at once; close one first"),
      limit_(limit) {}

SpawnRequest login_shell_request(const BoxSpec& spec, const std::string& cwd, uint16_t cols, uint16_t rows) {
  auto env = base_env(spec, /*tty=*/true);
  env["TERM"] = "xterm-256color";
  env["PWD"] = cwd;
  SpawnRequest req;
  req.argv = {spec.shell, "-l"};
  req.env = env_strings(env);
  req.cwd = cwd;
  req.tty = true;
  req.cols = cols;
  req.rows = rows;
  return req;
}

struct Terminals::Impl : std::enable_shared_from_this<Terminals::Impl> {
  class Client;

  struct Input {
    std::string bytes;
    std::function<void()> written;
  };

  // One terminal. Which thread may touch what is said per group.
  struct Term {
    Term(Strand s, size_t replay_bytes) : strand(std::move(s)), replay(replay_bytes) {}

    // Set before the terminal is published, then constant.
    Strand strand;  // its account's
    std::string id, account, created_at;
    uint64_t seq = 0;  // creation order, for listings
    pid_t pid = 0;
    uint64_t spawn = 0;  // the box's id for the shell: what signals name

    // Its strand only.
    std::unique_ptr<Descriptor> pty;  // the master: output read, keystrokes written
    bool pty_eof = false;
    ReplayBuffer replay;
    std::vector<std::weak_ptr<Client>> clients;
    std::deque<Input> input;
    size_t input_bytes = 0;
    bool writing = false;
    Clock::time_point last_activity = Clock::now();
    std::unique_ptr<asio::steady_timer> idle_timer, kill_timer;
    bool shell_ended = false;  // its spawn's end was reported
    bool closed = false;       // out of the registry; clients told; being or been killed
    int kill_stage = 0;        // 0: nothing sent, 1: SIGHUP sent, 2: SIGKILL sent
    std::vector<std::function<void(bool)>> removed;  // remove() callers waiting for the end
  };

  // A client's handle. The terminal holds it weakly, so the client's owner decides its life.
  class Client : public TerminalClient {
   public:
    Client(std::weak_ptr<Impl> impl, std::shared_ptr<Term> term, TerminalSink sink)
        : impl_(std::move(impl)), term_(term), sink_(std::move(sink)) {}
    ~Client() override { detach(); }

    void input(std::string bytes, std::function<void()> written) override {
      auto impl = impl_.lock();
      auto term = term_.lock();
      if (!impl || !term) return written();
      impl->defer(term->strand, [impl = impl.get(), term, bytes = std::move(bytes), written = std::move(written)]() mutable {
        impl->queue_input(term, std::move(bytes), std::move(written));
      });
    }

    void resize(uint16_t cols, uint16_t rows) override {
      if (cols == 0 || rows == 0) return;
      auto impl = impl_.lock();
      auto term = term_.lock();
      if (!impl || !term) return;
      impl->post(term->strand, [term, cols, rows] {
        if (!term->pty) return;
        winsize ws{};
        ws.ws_col = cols;
        ws.ws_row = rows;
        ::ioctl(term->pty->native_handle(), TIOCSWINSZ, &ws);  // the kernel sends SIGWINCH
      });
    }

    void detach() override {
      {
        std::lock_guard lock(mu_);
        if (detached_) return;
        detached_ = true;
        sink_ = {};
      }
      // The idle clock starts when the last client leaves.
      auto impl = impl_.lock();
      auto term = term_.lock();
      if (impl && term) impl->post(term->strand, [impl = impl.get(), term] { impl->prune_clients(*term); });
    }

    // The terminal's strand only. Under the lock, so that after detach() returns no call runs.
    void output(std::string_view bytes) {
      std::lock_guard lock(mu_);
      if (sink_.output) sink_.output(bytes);
    }
    void ended(const std::string& why) {
      std::lock_guard lock(mu_);
      if (sink_.ended) sink_.ended(why);
      sink_ = {};
      detached_ = true;
    }
    bool detached() {
      std::lock_guard lock(mu_);
      return detached_;
    }

   private:
    std::weak_ptr<Impl> impl_;
    std::weak_ptr<Term> term_;
    std::mutex mu_;  // guards sink_ and detached_
    TerminalSink sink_;
    bool detached_ = false;
  };

  Impl(asio::io_context& l, TerminalPort& b, TerminalOptions o) : loop(l), boxes(b), opts(o) {}

  // Nothing below touches boxes or a sink after this returns; handlers still queued find
  // `stopping` and do nothing, and the terminals' descriptors are closed.
  void shut_down() {
    {
      std::unique_lock lock(alive_mu);
      stopping = true;
    }
    std::vector<std::shared_ptr<Term>> all;
    {
      std::lock_guard lock(mu);
      for (auto& [id, t] : terms) all.push_back(t);
      terms.clear();
    }
    for (auto& t : all)
      asio::post(t->strand, [t] {
        t->pty.reset();
        t->idle_timer.reset();
        t->kill_timer.reset();
        t->clients.clear();
        t->input.clear();
        t->removed.clear();
      });
  }

  // Runs fn now unless shutting down; shut_down() waits for it meanwhile.
  template <class Fn>
  void guarded(Fn&& fn) {
    std::shared_lock lock(alive_mu);
    if (stopping) return;
    try {
      fn();
    } catch (...) {
      // A failing handler (an allocation, a callback) must not take the loop down.
    }
  }

  // Runs fn on ex, guarded, with this kept alive meanwhile.
  template <class Executor, class Fn>
  void post(const Executor& ex, Fn fn) {
    asio::post(ex, [self = shared_from_this(), fn = std::move(fn)]() mutable { self->guarded(fn); });
  }
  // The same for a hand-off that continues the caller's work (a keystroke on its way to the
  // pty): run by the calling io thread once its handler returns, not by waking another thread.
  template <class Executor, class Fn>
  void defer(const Executor& ex, Fn fn) {
    asio::defer(ex, [self = shared_from_this(), fn = std::move(fn)]() mutable { self->guarded(fn); });
  }

  Strand strand_for(const std::string& account) {
    std::lock_guard lock(mu);
    auto it = strands.find(account);
    if (it == strands.end()) it = strands.emplace(account, asio::make_strand(loop)).first;
    return it->second;
  }

  template <class Fn, class... Args>
  static void call_quietly(Fn& fn, Args&&... args) {
    try {
      if (fn) fn(std::forward<Args>(args)...);
    } catch (...) {
      // A caller's callback must not take the loop down.
    }
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
    if (--it->second == 0) {
      per_account.erase(it);
      strands.erase(account);  // made again on next use
    }
  }

  // ---- a terminal's strand -----------------------------------------------------------------

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
      t->pty = std::make_unique<Descriptor>(t->strand, spawned.pty_master.release());
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
    arm_read(t);
    arm_idle(t, t->last_activity + opts.idle_timeout);
    call_quietly(done, CreateOutcome{TerminalInfo{t->id, t->created_at, t->pid}, nullptr});
  }

  void arm_read(const std::shared_ptr<Term>& t) {
    t->pty->async_wait(Descriptor::wait_read, [self = shared_from_this(), t](const boost::system::error_code& ec) {
      if (ec || !t->pty) return;  // closed by close() or shutdown
      self->guarded([&] {
        if (self->read_available(t)) {
          t->pty_eof = true;  // no process holds the terminal; the shell's end follows
        } else if (t->pty) {
          self->arm_read(t);
        }
      });
    });
  }

  // Reads what the pty has now and hands it out; true at EOF (a pty master answers EIO once no
  // process holds the terminal). At most kReadsPerWakeup reads, then the strand's other work.
  bool read_available(const std::shared_ptr<Term>& t) {
    thread_local std::vector<char> buf(kReadBuffer);
    for (int k = 0; k < kReadsPerWakeup; ++k) {
      const ssize_t n = ::read(t->pty->native_handle(), buf.data(), buf.size());
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
    for (auto& weak : t.clients) {
      auto c = weak.lock();
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

  void attach_on_strand(const std::shared_ptr<Term>& t, const std::shared_ptr<Client>& c) {
    if (t->closed) {
      c->ended("terminal ended");
      return;
    }
    // Replay, then live: both on this strand, so nothing is shown twice or skipped.
    const std::string replay = t->replay.contents();
    if (!replay.empty()) c->output(replay);
    t->clients.push_back(c);
    t->last_activity = Clock::now();
  }

  // Checks at the deadline whether the terminal has been idle for the whole timeout: no
  // client attached, no output, no keystrokes. Otherwise looks again when it could be.
  void arm_idle(const std::shared_ptr<Term>& t, Clock::time_point at) {
    t->idle_timer = std::make_unique<asio::steady_timer>(t->strand, at);
    t->idle_timer->async_wait([self = shared_from_this(), t](const boost::system::error_code& ec) {
      if (ec) return;
      self->guarded([&] {
        if (t->closed) return;
        self->prune_clients(*t);
        const auto now = Clock::now();
        if (!t->clients.empty()) return self->arm_idle(t, now + self->opts.idle_timeout);
        if (now - t->last_activity >= self->opts.idle_timeout)
          return self->close(t, "terminal ended: idle with no client attached", /*kill=*/true);
        self->arm_idle(t, t->last_activity + self->opts.idle_timeout);
      });
    });
  }

  void queue_input(const std::shared_ptr<Term>& t, std::string bytes, std::function<void()> written) {
    if (!t->pty || t->closed || t->pty_eof || t->input_bytes + bytes.size() > opts.input_queue_bytes) {
      call_quietly(written);
      return;
    }
    t->last_activity = Clock::now();
    t->input_bytes += bytes.size();
    t->input.push_back({std::move(bytes), std::move(written)});
    if (!t->writing) write_next(t);
  }

  void write_next(const std::shared_ptr<Term>& t) {
    if (t->input.empty() || !t->pty) {
      t->writing = false;
      return;
    }
    t->writing = true;
    asio::async_write(*t->pty, asio::buffer(t->input.front().bytes),
                      [self = shared_from_this(), t](const boost::system::error_code& ec, size_t) {
                        self->guarded([&] {
                          t->writing = false;
                          if (ec) return self->drop_input(*t);  // the terminal is gone
                          Input done = std::move(t->input.front());
                          t->input.pop_front();
                          t->input_bytes -= done.bytes.size();
                          call_quietly(done.written);
                          self->write_next(t);
                        });
                      });
  }

  static void drop_input(Term& t) {
    auto input = std::move(t.input);
    t.input.clear();
    t.input_bytes = 0;
    for (auto& i : input) call_quietly(i.written);
  }

  // Its box reported the shell's end (tagged with its spawn id, so it is this shell's).
  void handle_end(const std::shared_ptr<Term>& t, SpawnEnd end) {
    if (t->shell_ended) return;
    t->shell_ended = true;
    t->kill_timer.reset();
    if (t->pty && !t->pty_eof) read_available(t);  // what it printed last
    if (!t->closed) close(t, exit_reason(end), /*kill=*/false);
    if (t->kill_stage == 1) {
      // The hangup ended the shell; what of its session ignored it (nohup, a trap) is killed
      // now, and remove() answers once that was done.
      t->kill_stage = 2;
      auto self = shared_from_this();
      boxes.signal_session(t->account, t->spawn, SIGKILL, [self, t](bool) {
        self->post(t->strand, [t] { finish_removal(*t); });
      });
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
    t->idle_timer.reset();
    t->pty.reset();  // cancels the read; a hangup for the shell's foreground job too
    drop_input(*t);
    if (kill && !t->shell_ended) {
      t->kill_stage = 1;
      boxes.signal_session(t->account, t->spawn, SIGHUP, [](bool) {});
      arm_kill_timer(t);
    }
  }

  void arm_kill_timer(const std::shared_ptr<Term>& t) {
    t->kill_timer = std::make_unique<asio::steady_timer>(t->strand, opts.kill_grace);
    t->kill_timer->async_wait([self = shared_from_this(), t](const boost::system::error_code& ec) {
      if (ec) return;
      self->guarded([&] {
        if (t->shell_ended) return;
        if (t->kill_stage == 1) {
          t->kill_stage = 2;
          self->boxes.signal_session(t->account, t->spawn, SIGKILL, [](bool) {});
          self->arm_kill_timer(t);
        } else {
          self->finish_removal(*t);  // not even KILL brought an exit (box unreachable): stay bounded
        }
      });
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

  void create(const BoxSpec& spec, SpawnRequest req, std::function<void(CreateOutcome)> done) {
    reserve(spec.name);
    std::shared_ptr<Term> t;
    try {
      t = std::make_shared<Term>(strand_for(spec.name), opts.replay_bytes);
      t->id = new_terminal_id();
      t->account = spec.name;
      t->created_at = iso_utc_now();
    } catch (...) {
      std::lock_guard lock(mu);
      release_locked(spec.name);
      throw;
    }

    // The box calls these on its own strand; the terminal's work moves to the account's.
    auto self = shared_from_this();
    SpawnHandlers h;
    h.started = [self, t, done](SpawnResult r) {
      auto result = std::make_shared<SpawnResult>(std::move(r));
      self->post(t->strand, [self, t, result, done] { self->started(t, std::move(*result), done); });
    };
    h.failed = [self, t, done](std::exception_ptr error) {
      {
        std::lock_guard lock(self->mu);
        self->release_locked(t->account);
      }
      call_quietly(done, CreateOutcome{std::nullopt, error});
    };
    h.ended = [self, t](SpawnEnd end) { self->post(t->strand, [self, t, end] { self->handle_end(t, end); }); };
    req.tty = true;
    try {
      boxes.spawn_terminal(spec, std::move(req), std::move(h));
    } catch (...) {
      std::lock_guard lock(mu);
      release_locked(spec.name);
      throw;
    }
  }

  asio::io_context& loop;
  TerminalPort& boxes;
  const TerminalOptions opts;

  std::shared_mutex alive_mu;  // shared by every handler at work; unique once by shut_down
  bool stopping = false;       // guarded by alive_mu

  mutable std::mutex mu;  // guards what follows
  std::map<std::string, std::shared_ptr<Term>> terms;  // open terminals by id
  std::unordered_map<std::string, size_t> per_account;  // open and opening, by account
  std::unordered_map<std::string, Strand> strands;      // by account, while it has any
  uint64_t next_seq = 0;
};

Terminals::Terminals(asio::io_context& loop, TerminalPort& boxes, TerminalOptions options)
    : impl_(std::make_shared<Impl>(loop, boxes, options)) {}

Terminals::~Terminals() { shut_down(); }

void Terminals::shut_down() { impl_->shut_down(); }

void Terminals::create(const BoxSpec& spec, SpawnRequest req, std::function<void(CreateOutcome)> done) {
  impl_->create(spec, std::move(req), std::move(done));
}

std::vector<TerminalInfo> Terminals::list(const std::string& account) const {
  std::vector<std::pair<uint64_t, TerminalInfo>> found;
  {
    std::lock_guard lock(impl_->mu);
    for (const auto& [id, t] : impl_->terms)
      if (t->account == account) found.emplace_back(t->seq, TerminalInfo{t->id, t->created_at, t->pid});
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
  return TerminalInfo{t->id, t->created_at, t->pid};
}

void Terminals::remove(const std::string& account, const std::string& id, std::function<void(bool)> done) {
  auto t = impl_->find(account, id);
  if (!t) return Impl::call_quietly(done, false);
  Impl& im = *impl_;
  im.post(t->strand, [&im, t, done = std::move(done)]() mutable {
    if (t->shell_ended) return Impl::call_quietly(done, true);
    t->removed.push_back(std::move(done));
    im.close(t, "terminal ended: deleted", /*kill=*/true);
  });
}

std::shared_ptr<TerminalClient> Terminals::attach(const std::string& account, const std::string& id, TerminalSink sink) {
  auto t = impl_->find(account, id);
  if (!t) return nullptr;
  auto c = std::make_shared<Impl::Client>(impl_, t, std::move(sink));
  Impl& im = *impl_;
  im.post(t->strand, [&im, t, c] { im.attach_on_strand(t, c); });
  return c;
}

size_t Terminals::count() const {
  std::lock_guard lock(impl_->mu);
  return impl_->terms.size();
}

}  // namespace agentbox::exec
