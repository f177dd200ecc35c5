#include "exec/process_table.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "exec/output_log.hpp"
#include "exec/process_id.hpp"
#include "util/error.hpp"
#include "util/shutdown_guard.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::exec {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using Descriptor = asio::posix::stream_descriptor;
using Strand = LoopStrand;
using namespace std::chrono_literals;

namespace {

constexpr auto kEvictAfter = 60s;      // a finished process leaves memory (store + disk remain)
constexpr size_t kReadBuffer = 64 << 10;
constexpr int kReadsPerWakeup = 4;     // then other processes get their turn
constexpr int kIdAttempts = 8;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Open Terminal's convention (Python's returncode): the exit status, or -signal.
std::optional<int> exit_code_of(int raw) {
  if (WIFEXITED(raw)) return WEXITSTATUS(raw);
  if (WIFSIGNALED(raw)) return -WTERMSIG(raw);
  return std::nullopt;
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  check(flags, "fcntl(F_GETFL)");
  check(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(F_SETFL, O_NONBLOCK)");
  check(::fcntl(fd, F_SETFD, FD_CLOEXEC), "fcntl(F_SETFD, FD_CLOEXEC)");
}

void make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int p[2];
  check(::pipe2(p, O_CLOEXEC), "pipe2");
  read_end.reset(p[0]);
  write_end.reset(p[1]);
}

void fill_output(ProcessView& v, LogRead&& r) {
  for (auto& c : r.chunks) v.output.push_back({std::string(to_string(c.type)), std::move(c.data)});
  v.truncated = r.truncated;
  v.more = r.more;
  v.next_offset = r.next_offset;
}

}  // namespace

struct ProcessTable::Impl : std::enable_shared_from_this<ProcessTable::Impl> {
  struct Stream {
    std::unique_ptr<Descriptor> desc;  // pty master (also written for input) or a pipe
    StreamType type = StreamType::output;
    bool open = false;                 // not at EOF yet
  };

  class WaitOp;

  // One process. Which thread may touch what is said per group.
  struct Proc {
    explicit Proc(std::shared_ptr<const Strand> s) : held(std::move(s)), strand(*held) {}

    // Set by start() before the process is published, then constant.
    std::shared_ptr<const Strand> held;  // keeps it the account's (util/account_strands.hpp)
    Strand strand;                       // its account's: the one its box's owner runs on too
    std::string id, account, command;
    bool tty = true;
    std::shared_ptr<OutputLog> log;
    UniqueFd pty_fd, stdout_fd, stderr_fd, stdin_fd;  // handed to the strand by setup()

    // Guarded by Impl::mu.
    ProcessStatus status = ProcessStatus::running;
    std::optional<int> exit_code;
    int64_t ended = 0;
    Clock::time_point finished_at;
    bool exited = false;          // its exit was seen (children may still hold the output)
    int raw_status = 0;
    bool kill_requested = false;  // kill() or timeout before the exit: ends as "killed"
    bool box_gone = false;        // the box stopped: no exit will come
    bool stdin_open = true;

    // Its strand only.
    uint64_t spawn = 0;  // the box's id for it: what signals name (set once it started)
    Stream streams[2];
    int open_streams = 0;
    std::unique_ptr<Descriptor> stdin_pipe;  // pipes mode
    std::deque<std::string> input_queue;
    bool writing = false;
    bool close_stdin_when_written = false;
    std::unique_ptr<asio::steady_timer> drain_timer, kill_timer, timeout_timer;
    int kill_stage = 0;  // 0: nothing sent, 1: TERM sent, 2: KILL sent
    std::vector<std::shared_ptr<WaitOp>> waiters;
    size_t prune_mark = 16;
    std::vector<std::function<void(bool)>> kill_done;
  };

  class WaitOp : public ProcessTable::Wait {
   public:
    enum State { pending = 0, completed = 1, cancelled = 2 };
    void cancel() override {
      int expected = pending;
      // Whoever moves the state first owns done: the loop calls it, or cancel drops it.
      if (state.compare_exchange_strong(expected, cancelled)) done = nullptr;
    }
    bool claim() {
      int expected = pending;
      return state.compare_exchange_strong(expected, completed);
    }
    bool settled() const { return state.load() != pending; }

    std::string account, id;
    ReadSpec read;
    bool until_output = false;
    Clock::time_point deadline;
    std::weak_ptr<Proc> proc;
    std::function<void(std::optional<ProcessView>)> done;
    std::atomic<int> state{pending};
    std::unique_ptr<asio::steady_timer> timer;  // the process's strand only
  };

  Impl(BoxLoop& l, ProcessSpawner& b, ProcessStore& s, ProcessTableOptions o)
      : loop(l), boxes(b), store(s), opts(std::move(o)), purge_strand(asio::make_strand(loop.context())) {
    if (!opts.log_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(opts.log_dir, ec);
      if (ec) throw Error("create " + opts.log_dir + ": " + ec.message(), ec.value());
      check(::chmod(opts.log_dir.c_str(), 0700), "chmod(" + opts.log_dir + ")");
    }
    store.mark_running_as_lost(unix_now());
  }

  // Nothing below touches boxes or store after this returns; handlers still queued on the
  // loop find the guard closed and do nothing, and the processes' descriptors are closed.
  void shut_down() {
    if (guard.closed()) return;
    guard.close();  // waits for the handlers at work
    std::vector<std::shared_ptr<Proc>> all;
    {
      std::lock_guard lock(mu);
      for (auto& [id, p] : procs) all.push_back(p);
    }
    for (auto& p : all)
      asio::post(p->strand, [p] {
        close_io(*p);
        for (auto& w : p->waiters) w->timer.reset();
        p->waiters.clear();
        p->kill_done.clear();
      });
    asio::post(purge_strand, [self = shared_from_this()] { self->purge_timer.reset(); });
  }

  // Runs fn on ex, guarded, with the table kept alive meanwhile.
  template <class Executor, class Fn>
  void post(const Executor& ex, Fn fn) {
    asio::post(ex, [self = shared_from_this(), fn = std::move(fn)]() mutable { self->guard.run(fn); });
  }
  // The same, at once when this thread runs ex already: a box's event for one of its account's
  // processes (the box's owner runs on the same strand) costs no second post.
  template <class Fn>
  void dispatch(const Strand& ex, Fn fn) {
    asio::dispatch(ex, [self = shared_from_this(), fn = std::move(fn)]() mutable { self->guard.run(fn); });
  }

  Strand strand_for(const std::string& account) { return *loop.strand_of(account); }

  // ---- a process's strand ----------------------------------------------------------------

  void setup(const std::shared_ptr<Proc>& p, std::optional<std::string> stdin_data,
             std::optional<std::chrono::milliseconds> timeout) {
    if (p->tty) {
      p->streams[0] = {std::make_unique<Descriptor>(p->strand, p->pty_fd.release()), StreamType::output, true};
      p->open_streams = 1;
    } else {
      p->streams[0] = {std::make_unique<Descriptor>(p->strand, p->stdout_fd.release()), StreamType::stdout_pipe, true};
      p->streams[1] = {std::make_unique<Descriptor>(p->strand, p->stderr_fd.release()), StreamType::stderr_pipe, true};
      p->stdin_pipe = std::make_unique<Descriptor>(p->strand, p->stdin_fd.release());
      p->open_streams = 2;
    }
    for (int i = 0; i < p->open_streams; ++i) arm_read(p, i);
    if (stdin_data) {
      // Pipes: the data is all the input there is, so the command sees EOF after it.
      p->close_stdin_when_written = !p->tty;
      queue_input(p, std::move(*stdin_data));
    }
    if (timeout) {
      p->timeout_timer = std::make_unique<asio::steady_timer>(p->strand, *timeout);
      p->timeout_timer->async_wait([self = shared_from_this(), p](const boost::system::error_code& ec) {
        if (!ec) self->guard.run([&] { self->loop_kill(p, false, nullptr); });
      });
    }
  }

  void arm_read(const std::shared_ptr<Proc>& p, int i) {
    p->streams[i].desc->async_wait(Descriptor::wait_read, [self = shared_from_this(), p, i](const boost::system::error_code& ec) {
      if (ec || !p->streams[i].desc) return;  // closed by finish() or shutdown
      self->guard.run([&] {
        const bool eof = self->read_available(p, i);
        if (eof) {
          p->streams[i].open = false;
          self->on_stream_eof(p);
        } else if (p->streams[i].desc) {
          self->arm_read(p, i);
        }
      });
    });
  }

  // Reads what the stream has now into the log; true at EOF. A pty master answers EIO once
  // no process holds the terminal any more: that is its EOF. At most kReadsPerWakeup reads, then
  // the strand's other work (this account's answers) gets its turn.
  bool read_available(const std::shared_ptr<Proc>& p, int i) {
    Stream& s = p->streams[i];
    thread_local std::vector<char> buf(kReadBuffer);
    bool got = false, eof = false;
    for (int k = 0; k < kReadsPerWakeup; ++k) {
      const ssize_t n = ::read(s.desc->native_handle(), buf.data(), buf.size());
      if (n > 0) {
        p->log->append(s.type, std::string_view(buf.data(), static_cast<size_t>(n)));
        got = true;
        if (static_cast<size_t>(n) < buf.size()) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      eof = true;  // 0, EIO, or an error that will not go away
      break;
    }
    if (got) notify_output(p);
    return eof;
  }

  void on_stream_eof(const std::shared_ptr<Proc>& p) {
    if (--p->open_streams > 0) return;
    bool exited, gone;
    {
      std::lock_guard lock(mu);
      exited = p->exited;
      gone = p->box_gone;
    }
    if (exited || gone) {
      finish(p);
    }
  }

  // Its box reported how it ended (tagged with its spawn's id, so it is this process's).
  void handle_end(const std::shared_ptr<Proc>& p, SpawnEnd end) {
    {
      std::lock_guard lock(mu);
      if (p->status != ProcessStatus::running || p->exited || p->box_gone) return;
      if (end.exited) {
        p->exited = true;
        p->raw_status = end.status;
      } else {
        p->box_gone = true;  // everything in the box is dead: its output reaches EOF now
      }
    }
    if (p->timeout_timer) p->timeout_timer.reset();
    if (p->open_streams == 0) {
      finish(p);
    } else {
      arm_drain(p);  // a background child may hold the output open for ever
    }
  }

  void arm_drain(const std::shared_ptr<Proc>& p) {
    if (p->drain_timer) return;
    p->drain_timer = std::make_unique<asio::steady_timer>(p->strand, opts.drain_grace);
    p->drain_timer->async_wait([self = shared_from_this(), p](const boost::system::error_code& ec) {
      if (!ec) self->guard.run([&] { self->finish(p); });
    });
  }

  static void close_io(Proc& p) {
    for (auto& s : p.streams) {
      s.desc.reset();
      s.open = false;
    }
    p.stdin_pipe.reset();
    p.drain_timer.reset();
    p.kill_timer.reset();
    p.timeout_timer.reset();
  }

  void finish(const std::shared_ptr<Proc>& p) {
    {
      std::lock_guard lock(mu);
      if (p->status != ProcessStatus::running) return;
    }
    for (int i = 0; i < 2; ++i)
      if (p->streams[i].desc && p->streams[i].open) read_available(p, i);
    // The log is complete before the status says so: a reader that sees "done" has it all.
    p->log->finish();
    ProcessStatus status;
    std::optional<int> code;
    const int64_t ended = unix_now();
    {
      std::lock_guard lock(mu);
      status = p->kill_requested || (p->box_gone && !p->exited) ? ProcessStatus::killed : ProcessStatus::done;
      if (p->exited) code = exit_code_of(p->raw_status);
      p->status = status;
      p->exit_code = code;
      p->ended = ended;
      p->finished_at = Clock::now();
      p->stdin_open = false;
    }
    close_io(*p);
    try {
      store.update(p->id, status, code, ended);
    } catch (const std::exception& e) {
      // The memory copy answers until eviction; a lost update only shows after a restart.
      report_store_failure("update", e);
    }
    auto waiters = std::move(p->waiters);
    p->waiters.clear();
    for (auto& w : waiters) complete(w);
    auto kill_done = std::move(p->kill_done);
    p->kill_done.clear();
    for (auto& d : kill_done) call_quietly(d, true);
  }

  template <class Fn, class... Args>
  static void call_quietly(Fn& fn, Args&&... args) {
    try {
      if (fn) fn(std::forward<Args>(args)...);
    } catch (...) {
      // A caller's callback must not take the loop down.
    }
  }

  // Said once per distinct failure: a store that keeps failing does not fill the log.
  void report_store_failure(const char* what, const std::exception& e) {
    std::string message = std::string("process store: ") + what + ": " + e.what();
    {
      std::lock_guard lock(mu);
      if (!reported.insert(message).second) return;
    }
    if (opts.on_error) opts.on_error(message);
  }

  // ---- waits -----------------------------------------------------------------------------

  void complete(const std::shared_ptr<WaitOp>& w) {
    w->timer.reset();
    if (!w->claim()) return;
    std::optional<ProcessView> view;
    try {
      if (auto p = w->proc.lock()) {
        view = view_of(*p, w->read);
      } else {
        view = load_view(w->account, w->id, w->read);
      }
    } catch (...) {
      // The store failed: answer as for an unknown process rather than never.
    }
    auto done = std::move(w->done);
    w->done = nullptr;
    call_quietly(done, std::move(view));
  }

  void start_wait(const std::shared_ptr<Proc>& p, const std::shared_ptr<WaitOp>& w) {
    if (w->settled()) return;
    bool finished;
    {
      std::lock_guard lock(mu);
      finished = p->status != ProcessStatus::running;
    }
    if (finished || (w->until_output && p->log->end_offset() > w->read.offset) || Clock::now() >= w->deadline) {
      complete(w);
      return;
    }
    w->timer = std::make_unique<asio::steady_timer>(p->strand, w->deadline);
    w->timer->async_wait([self = shared_from_this(), w](const boost::system::error_code& ec) {
      if (!ec) self->guard.run([&] { self->complete(w); });
    });
    p->waiters.push_back(w);
    if (p->waiters.size() >= p->prune_mark) {
      prune_waiters(*p);
      p->prune_mark = std::max<size_t>(16, 2 * p->waiters.size());
    }
  }

  // Drops waits that are over (answered, timed out or cancelled), with their timers.
  static void prune_waiters(Proc& p) {
    std::erase_if(p.waiters, [](const std::shared_ptr<WaitOp>& w) {
      if (!w->settled()) return false;
      w->timer.reset();
      return true;
    });
  }

  void notify_output(const std::shared_ptr<Proc>& p) {
    if (p->waiters.empty()) return;
    const uint64_t end = p->log->end_offset();
    for (auto& w : p->waiters)
      if (!w->settled() && w->until_output && end > w->read.offset) complete(w);
    prune_waiters(*p);
  }

  // ---- kill and input --------------------------------------------------------------------

  void send_signal(const Proc& p, int sig) {
    try {
      boxes.signal(p.account, p.spawn, sig);
    } catch (...) {
      // The box is going away; the escalation timer still ends the process.
    }
  }

  void loop_kill(const std::shared_ptr<Proc>& p, bool force, std::function<void(bool)> done) {
    bool running;
    {
      std::lock_guard lock(mu);
      running = p->status == ProcessStatus::running;
      if (running && !p->exited) p->kill_requested = true;
    }
    if (!running) {
      call_quietly(done, true);
      return;
    }
    if (done) p->kill_done.push_back(std::move(done));
    if (force && p->kill_stage < 2) {
      p->kill_stage = 2;
      send_signal(*p, SIGKILL);
      arm_kill_timer(p);
    } else if (p->kill_stage == 0) {
      p->kill_stage = 1;
      send_signal(*p, SIGTERM);
      arm_kill_timer(p);
    }
  }

  void arm_kill_timer(const std::shared_ptr<Proc>& p) {
    p->kill_timer = std::make_unique<asio::steady_timer>(p->strand, opts.kill_grace);
    p->kill_timer->async_wait([self = shared_from_this(), p](const boost::system::error_code& ec) {
      if (ec) return;
      self->guard.run([&] {
        if (p->kill_stage == 1) {
          p->kill_stage = 2;
          self->send_signal(*p, SIGKILL);
          self->arm_kill_timer(p);
        } else {
          self->finish(p);  // KILL got no exit either (box unreachable): the wait stays bounded
        }
      });
    });
  }

  Descriptor* input_target(Proc& p) { return p.tty ? p.streams[0].desc.get() : p.stdin_pipe.get(); }

  void queue_input(const std::shared_ptr<Proc>& p, std::string bytes) {
    if (!input_target(*p)) return;
    if (!bytes.empty()) p->input_queue.push_back(std::move(bytes));
    if (!p->writing) write_next(p);
  }

  void close_stdin(const std::shared_ptr<Proc>& p) {
    if (!p->stdin_pipe) return;
    p->stdin_pipe.reset();
    std::lock_guard lock(mu);
    p->stdin_open = false;
  }

  void write_next(const std::shared_ptr<Proc>& p) {
    Descriptor* target = input_target(*p);
    if (!target) return;
    if (p->input_queue.empty()) {
      p->writing = false;
      if (p->close_stdin_when_written) close_stdin(p);
      return;
    }
    p->writing = true;
    asio::async_write(*target, asio::buffer(p->input_queue.front()),
                      [self = shared_from_this(), p](const boost::system::error_code& ec, size_t) {
                        p->writing = false;
                        if (ec) {
                          // The reader is gone (EPIPE) or the process finished.
                          p->input_queue.clear();
                          if (!p->tty) self->close_stdin(p);
                          return;
                        }
                        p->input_queue.pop_front();
                        self->write_next(p);
                      });
  }

  // ---- retention -------------------------------------------------------------------------

  void purge() {
    const int64_t cutoff = unix_now() - static_cast<int64_t>(opts.retention.count());
    try {
      for (const auto& path : store.purge_ended_before_returning_logs(cutoff)) OutputLog::remove(path);
    } catch (const std::exception& e) {
      report_store_failure("purge (tried again next round)", e);
    }
    std::vector<std::shared_ptr<Proc>> evicted;
    {
      std::lock_guard lock(mu);
      const auto now = Clock::now();
      for (auto it = procs.begin(); it != procs.end();) {
        const Proc& p = *it->second;
        if (p.status != ProcessStatus::running && (p.ended < cutoff || now - p.finished_at >= kEvictAfter)) {
          evicted.push_back(std::move(it->second));
          it = procs.erase(it);
        } else {
          ++it;
        }
      }
    }
    purge_timer = std::make_unique<asio::steady_timer>(purge_strand, opts.purge_interval);
    purge_timer->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->guard.run([&] { self->purge(); });
    });
  }

  // ---- any thread ------------------------------------------------------------------------

  std::shared_ptr<Proc> find_locked(const std::string& account, const std::string& id) {
    auto it = procs.find(id);
    if (it == procs.end() || it->second->account != account) return nullptr;
    return it->second;
  }

  std::shared_ptr<Proc> find(const std::string& account, const std::string& id) {
    std::lock_guard lock(mu);
    return find_locked(account, id);
  }

  ProcessView view_of(const Proc& p, const ReadSpec& read) {
    ProcessView v;
    {
      // Status first, output second: a "done" view then carries all the output.
      std::lock_guard lock(mu);
      v.id = p.id;
      v.command = p.command;
      v.status = p.status;
      v.exit_code = p.exit_code;
    }
    fill_output(v, p.log->read(read.offset, read.max_bytes, read.tail_lines));
    return v;
  }

  // A process that is not in memory: finished in an earlier daemon run, or evicted.
  std::optional<ProcessView> load_view(const std::string& account, const std::string& id, const ReadSpec& read) {
    auto rec = store.get(account, id);
    if (!rec) return std::nullopt;
    ProcessView v;
    v.id = rec->id;
    v.command = rec->command;
    v.status = rec->status;
    if (rec->exit_code) v.exit_code = static_cast<int>(*rec->exit_code);
    v.next_offset = read.offset;
    try {
      fill_output(v, OutputLog::open(rec->log_path)->read(read.offset, read.max_bytes, read.tail_lines));
    } catch (const Error&) {
      // The log is gone (removed by hand, or never written): the record still answers.
    }
    return v;
  }

  // The process's part once its box says it runs: record it, publish it, start reading.
  void started(const std::shared_ptr<Proc>& p, SpawnResult spawned, const std::string& log_path,
               std::optional<std::string> stdin_data, std::optional<std::chrono::milliseconds> timeout,
               const std::function<void(StartOutcome)>& done) {
    p->spawn = spawned.id;
    p->pty_fd = std::move(spawned.pty_master);
    ProcessRecord rec;
    rec.id = p->id;
    rec.account = p->account;
    rec.command = p->command;
    rec.started = unix_now();
    rec.log_path = log_path;
    try {
      if (p->tty && !p->pty_fd) throw Error("spawn: no terminal for the command");
      for (int fd : {p->pty_fd.get(), p->stdout_fd.get(), p->stderr_fd.get(), p->stdin_fd.get()})
        if (fd >= 0) set_nonblocking(fd);
      store.insert(rec);
    } catch (...) {
      // Not recorded means not started: nobody could ever see or stop it.
      send_signal(*p, SIGKILL);
      OutputLog::remove(log_path);
      call_quietly(done, StartOutcome{{}, std::current_exception()});
      return;
    }
    {
      std::lock_guard lock(mu);
      procs[p->id] = p;
    }
    setup(p, std::move(stdin_data), timeout);
    call_quietly(done, StartOutcome{p->id, nullptr});
  }

  void start(StartRequest req, std::function<void(StartOutcome)> done) {
    std::shared_ptr<OutputLog> log;
    std::string id, log_path;
    const std::string log_dir = opts.log_dir_of ? opts.log_dir_of(req.box.name) : opts.log_dir;
    for (int attempt = 0;; ++attempt) {
      id = new_process_id();
      log_path = log_dir + "/" + id + ".log";
      try {
        log = OutputLog::create(log_path, opts.output_cap, opts.memory_tail);  // exclusive: the id is new
        break;
      } catch (const Error& e) {
        if (e.code() != EEXIST || attempt + 1 >= kIdAttempts) throw;
      }
    }

    auto p = std::make_shared<Proc>(loop.strand_of(req.box.name));
    p->id = id;
    p->account = req.box.name;
    p->command = req.command;
    p->tty = req.spawn.tty;
    p->log = log;
    p->stdin_open = req.spawn.tty || !req.stdin_data;

    std::vector<UniqueFd> stdio;
    if (!p->tty) {
      UniqueFd child_in, child_out, child_err;
      make_pipe(child_in, p->stdin_fd);
      make_pipe(p->stdout_fd, child_out);
      make_pipe(p->stderr_fd, child_err);
      stdio.push_back(std::move(child_in));
      stdio.push_back(std::move(child_out));
      stdio.push_back(std::move(child_err));
    }

    // The box calls these on the account's strand, which is the process's: they run at once.
    auto self = shared_from_this();
    SpawnHandlers h;
    h.started = [self, p, log_path, stdin_data = req.stdin_data, timeout = req.timeout, done](SpawnResult r) {
      auto result = std::make_shared<SpawnResult>(std::move(r));
      self->dispatch(p->strand, [self, p, result, log_path, stdin_data, timeout, done]() mutable {
        self->started(p, std::move(*result), log_path, std::move(stdin_data), timeout, done);
      });
    };
    h.failed = [self, log_path, done](std::exception_ptr error) {
      OutputLog::remove(log_path);
      call_quietly(done, StartOutcome{{}, error});
    };
    h.ended = [self, p](SpawnEnd end) { self->dispatch(p->strand, [self, p, end] { self->handle_end(p, end); }); };
    boxes.spawn(req.box, std::move(req.spawn), std::move(stdio), std::move(h));
  }

  BoxLoop& loop;
  ProcessSpawner& boxes;
  ProcessStore& store;
  const ProcessTableOptions opts;
  Strand purge_strand;
  std::unique_ptr<asio::steady_timer> purge_timer;  // purge_strand only

  ShutdownGuard guard{"process-table"};  // every handler runs through it; closed by shut_down()

  std::mutex mu;
  std::map<std::string, std::shared_ptr<Proc>> procs;  // by id
  std::set<std::string> reported;                      // failures said once
};

ProcessTable::ProcessTable(BoxLoop& loop, ProcessSpawner& boxes, ProcessStore& store, ProcessTableOptions opts)
    : impl_(std::make_shared<Impl>(loop, boxes, store, std::move(opts))) {
  impl_->post(impl_->purge_strand, [impl = impl_.get()] { impl->purge(); });
}

ProcessTable::~ProcessTable() { shut_down(); }

void ProcessTable::shut_down() { impl_->shut_down(); }

void ProcessTable::start(StartRequest req, std::function<void(StartOutcome)> done) {
  impl_->start(std::move(req), std::move(done));
}

std::vector<ProcessSummary> ProcessTable::list(const std::string& account) {
  Impl& im = *impl_;
  const auto records = im.store.list_by_account(account);
  std::vector<ProcessSummary> out;
  out.reserve(records.size());
  std::lock_guard lock(im.mu);
  for (const auto& r : records) {
    ProcessSummary s;
    s.id = r.id;
    s.command = r.command;
    s.status = r.status;
    if (r.exit_code) s.exit_code = static_cast<int>(*r.exit_code);
    if (auto p = im.find_locked(account, r.id)) {  // newer than the store while it runs
      s.status = p->status;
      s.exit_code = p->exit_code;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<ProcessView> ProcessTable::get(const std::string& account, const std::string& id,
                                             const ReadSpec& read) {
  if (auto p = impl_->find(account, id)) return impl_->view_of(*p, read);
  return impl_->load_view(account, id, read);
}

std::shared_ptr<ProcessTable::Wait> ProcessTable::wait(const std::string& account, const std::string& id,
                                                       const ReadSpec& read, bool until_output,
                                                       std::chrono::steady_clock::time_point deadline,
                                                       std::function<void(std::optional<ProcessView>)> done) {
  Impl& im = *impl_;
  auto w = std::make_shared<Impl::WaitOp>();
  w->account = account;
  w->id = id;
  w->read = read;
  w->until_output = until_output;
  w->deadline = deadline;
  w->done = std::move(done);
  if (auto p = im.find(account, id)) {
    w->proc = p;
    im.post(p->strand, [&im, p, w] { im.start_wait(p, w); });
  } else {
    im.post(im.strand_for(account), [&im, w] { im.complete(w); });  // from the store, or nullopt
  }
  return w;
}

InputResult ProcessTable::input(const std::string& account, const std::string& id, std::string bytes) {
  Impl& im = *impl_;
  std::shared_ptr<Impl::Proc> p;
  bool close_after = false;
  {
    std::lock_guard lock(im.mu);
    p = im.find_locked(account, id);
    if (p) {
      if (p->status != ProcessStatus::running || p->exited) return InputResult::exited;
      if (!p->stdin_open) return InputResult::closed;
      // Without a terminal nothing turns Ctrl-D into end of input: "\x04" closes stdin here,
      // after the bytes before it (what follows it has nowhere to go).
      if (const size_t eot = bytes.find('\x04'); !p->tty && eot != std::string::npos) {
        bytes.resize(eot);
        close_after = true;
        p->stdin_open = false;
      }
    }
  }
  if (!p) return im.store.get(account, id) ? InputResult::exited : InputResult::not_found;
  im.post(p->strand, [&im, p, bytes = std::move(bytes), close_after]() mutable {
    if (close_after) p->close_stdin_when_written = true;
    im.queue_input(p, std::move(bytes));
  });
  return InputResult::ok;
}

bool ProcessTable::signal(const std::string& account, const std::string& id, int sig) {
  Impl& im = *impl_;
  std::shared_ptr<Impl::Proc> p;
  {
    std::lock_guard lock(im.mu);
    p = im.find_locked(account, id);
    if (!p || p->status != ProcessStatus::running || p->exited) return false;
  }
  im.post(p->strand, [&im, p, sig] { im.send_signal(*p, sig); });
  return true;
}

void ProcessTable::kill(const std::string& account, const std::string& id, bool force,
                        std::function<void(bool found)> done) {
  Impl& im = *impl_;
  if (auto p = im.find(account, id)) {
    im.post(p->strand, [&im, p, force, done = std::move(done)]() mutable { im.loop_kill(p, force, std::move(done)); });
  } else {
    im.post(im.strand_for(account), [&im, account, id, done = std::move(done)]() mutable {
      bool found = false;
      try {
        found = im.store.get(account, id).has_value();  // finished earlier: its record stays as is
      } catch (...) {
      }
      Impl::call_quietly(done, found);
    });
  }
}

}  // namespace agentbox::exec
