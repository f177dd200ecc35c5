#pragma once
// ProcessTable's inside, private to exec/process_table.cpp (the table: start, waits, views,
// retention) and exec/process_table_io.cpp (a process's strand: its output, exit, kill, input).
// Split for size only; nothing outside those two files includes it.
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
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
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
#include "util/unhandled.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::exec {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using Descriptor = asio::posix::stream_descriptor;
using Strand = LoopStrand;
using namespace std::chrono_literals;

namespace ptable {

inline constexpr auto kEvictAfter = 60s;  // a finished process leaves memory (store + disk remain)
inline constexpr auto kLogRetry = 1s;     // how often a log the disk refused tries again
inline constexpr size_t kReadBuffer = 64 << 10;
inline constexpr int kReadsPerWakeup = 4;  // then other processes get their turn
inline constexpr int kIdAttempts = 8;

inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Open Terminal's convention (Python's returncode): the exit status, or -signal.
inline std::optional<int> exit_code_of(int raw) {
  if (WIFEXITED(raw)) return WEXITSTATUS(raw);
  if (WIFSIGNALED(raw)) return -WTERMSIG(raw);
  return std::nullopt;
}

inline void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  check(flags, "fcntl(F_GETFL)");
  check(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(F_SETFL, O_NONBLOCK)");
  check(::fcntl(fd, F_SETFD, FD_CLOEXEC), "fcntl(F_SETFD, FD_CLOEXEC)");
}

inline void make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int p[2];
  check(::pipe2(p, O_CLOEXEC), "pipe2");
  read_end.reset(p[0]);
  write_end.reset(p[1]);
}

inline void fill_output(ProcessView& v, LogRead&& r) {
  for (auto& c : r.chunks) v.output.push_back({std::string(to_string(c.type)), std::move(c.data)});
  v.truncated = r.truncated;
  v.more = r.more;
  v.next_offset = r.next_offset;
}

}  // namespace ptable

struct ProcessTable::Impl : std::enable_shared_from_this<ProcessTable::Impl> {
  struct Stream {
    std::unique_ptr<Descriptor> desc;  // pty master (also written for input) or a pipe
    StreamType type = StreamType::output;
    bool open = false;  // not at EOF yet
  };

  class WaitOp;

  // One process. Which thread may touch what is said per group.
  struct Proc {
    explicit Proc(std::shared_ptr<const Strand> s) : held(std::move(s)), strand(*held) {}

    // Set by start() before the process is published, then constant.
    std::shared_ptr<const Strand> held;  // keeps it the account's (util/account_strands.hpp)
    Strand strand;                       // its account's: the one its box's owner runs on too
    std::string id, account, command;
    std::string chat;  // the chat it runs for, "" for none
    bool tty = true;
    std::shared_ptr<OutputLog> log;
    UniqueFd pty_fd, stdout_fd, stderr_fd, stdin_fd;  // handed to the strand by setup()

    // Guarded by Impl::mu.
    ProcessStatus status = ProcessStatus::running;
    std::optional<int> exit_code;
    int64_t ended = 0;
    Clock::time_point finished_at;
    bool exited = false;  // its exit was seen (children may still hold the output)
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
    std::unique_ptr<asio::steady_timer> log_retry;  // after the end, while its log misses output
    int kill_stage = 0;                             // 0: nothing sent, 1: TERM sent, 2: KILL sent
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
    store.mark_running_as_lost(ptable::unix_now());
  }

  // Nothing below touches boxes or store after this returns; handlers still queued on the
  // loop find the guard closed and do nothing, and the processes' descriptors are closed.
  void shut_down();

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
             std::optional<std::chrono::milliseconds> timeout);

  void arm_read(const std::shared_ptr<Proc>& p, int i);

  // Reads what the stream has now into the log; true at EOF. A pty master answers EIO once
  // no process holds the terminal any more: that is its EOF. At most kReadsPerWakeup reads, then
  // the strand's other work (this account's answers) gets its turn.
  bool read_available(const std::shared_ptr<Proc>& p, int i);

  void on_stream_eof(const std::shared_ptr<Proc>& p);

  // Its box reported how it ended (tagged with its spawn's id, so it is this process's).
  void handle_end(const std::shared_ptr<Proc>& p, SpawnEnd end);

  void arm_drain(const std::shared_ptr<Proc>& p);
  void retry_log(const std::shared_ptr<Proc>& p);

  static void close_io(Proc& p);

  void finish(const std::shared_ptr<Proc>& p);

  // Records a process's end; one the store refuses (a full state disk) is kept and written with
  // the next end or purge pass, or at shutdown, so a restart still reads "done", not "lost".
  void save_end(const std::string& id, ProcessStatus status, std::optional<int> code, int64_t ended);
  void save_unsaved_ends();

  // A caller's callback: what it throws is reported (util/unhandled.hpp), never the loop's.
  template <class Fn, class... Args>
  static void call_quietly(Fn& fn, Args&&... args) {
    call_reporting("process-table callback", fn, std::forward<Args>(args)...);
  }

  // Said once per distinct failure: a store that keeps failing does not fill the log.
  void report_store_failure(const char* what, const std::exception& e);

  // ---- waits -----------------------------------------------------------------------------

  void complete(const std::shared_ptr<WaitOp>& w);

  void start_wait(const std::shared_ptr<Proc>& p, const std::shared_ptr<WaitOp>& w);

  // Drops waits that are over (answered, timed out or cancelled), with their timers.
  static void prune_waiters(Proc& p);

  void notify_output(const std::shared_ptr<Proc>& p);

  // ---- kill and input --------------------------------------------------------------------

  void send_signal(const Proc& p, int sig);

  void loop_kill(const std::shared_ptr<Proc>& p, bool force, std::function<void(bool)> done);

  void arm_kill_timer(const std::shared_ptr<Proc>& p);

  Descriptor* input_target(Proc& p) { return p.tty ? p.streams[0].desc.get() : p.stdin_pipe.get(); }

  void queue_input(const std::shared_ptr<Proc>& p, std::string bytes);

  void close_stdin(const std::shared_ptr<Proc>& p);

  void write_next(const std::shared_ptr<Proc>& p);

  // ---- retention -------------------------------------------------------------------------

  void purge();

  // ---- any thread ------------------------------------------------------------------------

  std::shared_ptr<Proc> find_locked(const std::string& account, const std::string& id);

  std::shared_ptr<Proc> find(const std::string& account, const std::string& id);

  ProcessView view_of(const Proc& p, const ReadSpec& read);

  // A process that is not in memory: finished in an earlier daemon run, or evicted.
  std::optional<ProcessView> load_view(const std::string& account, const std::string& id, const ReadSpec& read);

  // The process's part once its box says it runs: record it, publish it, start reading.
  void started(const std::shared_ptr<Proc>& p, SpawnResult spawned, const std::string& log_path,
               std::optional<std::string> stdin_data, std::optional<std::chrono::milliseconds> timeout,
               const std::function<void(StartOutcome)>& done);

  void start(StartRequest req, std::function<void(StartOutcome)> done);

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
  struct UnsavedEnd {
    std::string id;
    ProcessStatus status;
    std::optional<int> code;
    int64_t ended;
  };
  std::deque<UnsavedEnd> unsaved;  // ends the store refused, oldest first (bounded)
};

}  // namespace agentbox::exec
