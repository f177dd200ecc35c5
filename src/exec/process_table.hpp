#pragma once
// ProcessTable: the commands run through /execute, per account (DESIGN §5). Each process has an
// id, an owner account, a status, an exit code and an output log (output_log.hpp) with absolute
// byte offsets. Output is read and long-polls wait on the box loop (util/box_loop.hpp), never
// on a blocked thread, so thousands of waits cost a timer each; each account's processes run on
// a strand of their own, so one account's flood of output holds at most one loop thread and
// never delays another account's answers. Every lookup is scoped to one account: another
// account's id is "not found", never "forbidden" (ids are not an oracle).
//
// Lifecycle of a process: start() spawns it through the ProcessSpawner; its output is collected until
// the command has exited (its spawn's `ended`, which the box tags with the spawn's id) and its
// output has drained (EOF, or a short grace after the exit when a background child keeps the
// terminal open); then it is finished: status done (exit_code = exit status, or -signal when a
// signal ended it) or killed (kill(), timeout, or its box went away). A finished process stays
// queryable for `retention`, across daemon restarts (ProcessStore + the log file); one that was
// running when the daemon stopped reads back as "lost".
//
// Runs on: the box loop, each process on its account's strand (BoxLoop::strand_of, shared with
// the account's box in BoxManager, so a box's event for a process is handled in the same turn);
// every handler through one ShutdownGuard (util/shutdown_guard.hpp). Public methods from any
// thread; the destructor not from a loop thread.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "box/box_owner.hpp"
#include "store/process_store.hpp"
#include "util/box_loop.hpp"

namespace agentbox::exec {

// Where the table's commands run: the daemon's boxes (exec/account_boxes.hpp), a fake in tests.
class ProcessSpawner {
 public:
  virtual ~ProcessSpawner() = default;
  // Starts req in the box `spec` describes (starting it if needed); the handlers report its
  // start and end (box/box_owner.hpp). Pipes mode: stdio = in, out, err. Returns the spawn's id.
  virtual uint64_t spawn(const BoxSpec& spec, SpawnRequest req, std::vector<UniqueFd> stdio,
                         SpawnHandlers handlers) = 0;
  // Signals the process group of spawn `id` in account's box (nothing if it has ended).
  virtual void signal(const std::string& account, uint64_t id, int sig) = 0;
};

struct OutputChunk {
  std::string type;  // "output" (pty: stdout and stderr merged), "stdout", "stderr"
  std::string data;
};

struct ProcessSummary {  // GET /execute
  std::string id;
  std::string command;
  ProcessStatus status = ProcessStatus::running;
  std::optional<int> exit_code;
};

struct ProcessView : ProcessSummary {  // the process object of API.md
  std::vector<OutputChunk> output;
  bool truncated = false;    // output before the returned part is gone (cap) or cut by tail
  bool more = false;         // output past next_offset exists already: this is a page of it
  uint64_t next_offset = 0;  // pass back as offset to get only newer output
};

struct StartRequest {
  BoxSpec box;                                       // the account's box (box.name: the account)
  std::string command;                               // as the client sent it (shown in listings)
  SpawnRequest spawn;                                // argv, env, cwd, tty: built by the caller
  std::optional<std::string> stdin_data;             // written to the command's input; pipes: then closed
  std::optional<std::chrono::milliseconds> timeout;  // then killed as kill(force=false)
  std::string chat;                                  // the chat it runs for (X-Session-Id), "" for none
};

struct ReadSpec {
  uint64_t offset = 0;                 // absolute byte offset into the output
  std::optional<uint64_t> tail_lines;  // only the last N lines of what is available
  size_t max_bytes = 1 << 20;          // most output bytes in one answer (next_offset continues)
};

struct ProcessTableOptions {
  std::string log_dir;  // output logs live here (created 0700)
  // When set, an account's logs live in this directory of its own instead (made by the callee):
  // the daemon keeps them in the account's volume, charged to its quota.
  std::function<std::string(const std::string& account)> log_dir_of;
  uint64_t output_cap = 16ull << 20;                // bytes of output kept per process (newest)
  size_t memory_tail = 64 << 10;                    // of which the newest are also kept in memory
  std::chrono::seconds retention{3600};             // finished processes stay this long
  size_t keep_finished = 1000;                      // and at most this many per account; 0: no cap
  std::chrono::milliseconds kill_grace{3000};       // TERM → KILL after this
  std::chrono::milliseconds drain_grace{200};       // after exit, wait this long for output EOF
  std::chrono::milliseconds purge_interval{60000};  // how often expired records and logs go
};

enum class InputResult { ok, not_found, exited, closed };

// What start() reports: the new process's id, or why it did not start (SpawnError: the
// command could not run; BoxUnavailable: its box could not serve; Error: anything else).
struct StartOutcome {
  std::string id;
  std::exception_ptr error;
};

class ProcessTable {
 public:
  // Runs on `loop` (which must outlive the table); marks records left "running" by a previous
  // daemon "lost".
  ProcessTable(BoxLoop& loop, ProcessSpawner& boxes, ProcessStore& store, ProcessTableOptions opts);
  // shut_down().
  ~ProcessTable();
  ProcessTable(const ProcessTable&) = delete;
  ProcessTable& operator=(const ProcessTable&) = delete;

  // Starts a command; done reports its id once it runs and is recorded, or why it did not
  // start (nothing is recorded then). done runs on a loop thread, once. Throws Error only when
  // its output log cannot be made (then nothing was started).
  void start(StartRequest req, std::function<void(StartOutcome)> done);

  // The account's processes (running and retained), oldest first.
  std::vector<ProcessSummary> list(const std::string& account);
  // Those run for chat `chat` only; all of the account's when chat is "".
  std::vector<ProcessSummary> list(const std::string& account, const std::string& chat);
  // Now; nullopt when account has no process id.
  std::optional<ProcessView> get(const std::string& account, const std::string& id, const ReadSpec& read);

  // Long-poll: calls done once, on a loop thread, with the view when the process has
  // finished, or (when until_output) as soon as output past read.offset exists, or at
  // deadline with the view as it is; done(nullopt) when there is no such process. The handle
  // cancels the wait (done is not called after cancel() returns, unless it was already
  // running); dropping it does not cancel. Handles may outlive the table. Waits still pending
  // when the table is destroyed are dropped without a call.
  class Wait {
   public:
    virtual ~Wait() = default;
    virtual void cancel() = 0;
  };
  std::shared_ptr<Wait> wait(const std::string& account, const std::string& id, const ReadSpec& read, bool until_output,
                             std::chrono::steady_clock::time_point deadline,
                             std::function<void(std::optional<ProcessView>)> done);

  // Writes bytes to the command's input (pty or stdin pipe). ok means queued: the bytes are
  // written on the loop, in order. exited: the command has ended (or is from an
  // earlier run); closed: pipes mode and its stdin was closed (after stdin_data, or EPIPE).
  InputResult input(const std::string& account, const std::string& id, std::string bytes);

  // Only sends sig to the process group (SIGINT: "stop what you are doing", as Ctrl-C would);
  // false when there is no such process still running. kill() is what ends one for sure.
  bool signal(const std::string& account, const std::string& id, int sig);

  // TERM (KILL when force) to the process group; after kill_grace without exit, KILL. done(true)
  // once it has finished (status killed), done(false) when there is no such process. A process
  // already finished: done(true) at once, its record unchanged. Bounded: if not even KILL
  // brings an exit within another kill_grace (box unreachable), it is recorded killed anyway.
  // A command that had already exited and only waits for its output to drain ends as done.
  void kill(const std::string& account, const std::string& id, bool force, std::function<void(bool found)> done);

  // Running commands are left to their boxes (their records read back as "lost" next time);
  // nothing of the table runs after this returns, and waits still pending are dropped without a
  // call. Idempotent; not from a loop thread.
  void shut_down();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the handlers it queues on the loop
};

}  // namespace agentbox::exec
