#pragma once
// The daemon's owner of one box (DESIGN §3, "One owner per box"). It holds init's two sockets
// and does every exchange with init on one strand of the box loop: requests are queued and sent
// without waiting, replies are matched to them by id in the order init answers, and exits
// arrive tagged with the id of the spawn that started them, so nothing is matched by pid and no
// thread ever waits on init. A start that takes longer than its timeout, a request init does
// not answer in time, a broken message or init's death stop the box; every request still
// pending then fails with the reason, and every command still running ends as "box gone".
//
// Lifecycle: launching (the LaunchedBox is being made on a launcher thread; requests queue)
// → starting (sockets held, StartBox answered yet) → ready → stopping (init being killed and
// its cgroup removed, off the loop) → gone (on_gone called once).
//
// Runs on: its account's strand of the box loop (util/account_strands.hpp), every method;
// what blocks (a box's end) goes to the launchers' pool, keyed by the box's name.
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "box/launch.hpp"
#include "box/spawn_result.hpp"
#include "metrics/events.hpp"
#include "util/account_strands.hpp"
#include "util/fair_pool.hpp"

namespace agentbox {

using BoxStrand = LoopStrand;

// How a started command ended for its owner.
struct SpawnEnd {
  bool exited = false;  // false: its box went away before its exit was seen
  int status = 0;       // raw wait status, when exited
};

// The two moments of a spawn, called on the account's strand: started (with the command's pid
// and pty) or failed (SpawnError: it could not run; BoxUnavailable: its box could not serve;
// Error: anything else), and after a start, ended, once.
struct SpawnHandlers {
  std::function<void(SpawnResult)> started;
  std::function<void(std::exception_ptr)> failed;
  std::function<void(SpawnEnd)> ended;
};

class BoxOwner : public std::enable_shared_from_this<BoxOwner> {
 public:
  struct Options {
    std::chrono::milliseconds start_timeout{30000};    // launch to init's answer
    std::chrono::milliseconds request_timeout{10000};  // a request at the head of the line
  };
  // Called once on the strand when the box is gone; why is empty after an ordinary stop.
  using OnGone = std::function<void(const std::shared_ptr<BoxOwner>&, const std::string& why)>;

  // blocking: where LaunchedBox::end() runs (it waits for init's death and removes the
  // cgroup), keyed by name; it must outlive the owner's work there.
  BoxOwner(BoxStrand strand, FairPool& blocking, std::string name, Options options, OnGone on_gone);
  ~BoxOwner();

  // Everything below runs on the strand only.

  void launched(std::unique_ptr<LaunchedBox> box);
  void launch_failed(const std::string& why);

  // Queues the command's start; stdio (pipes mode) is sent with it and closed here after.
  void spawn(uint64_t id, SpawnRequest req, std::vector<UniqueFd> stdio, SpawnHandlers handlers);
  // Signals spawn's process group (whole_session: every process of its session); done(false)
  // when it had ended or the box is going.
  void signal(uint64_t spawn, int sig, bool whole_session, std::function<void(bool delivered)> done);
  // The TCP listeners in the box; empty when init could not say.
  void list_ports(std::function<void(std::vector<protocol::ListeningPort>)> done);
  // Processes besides init; nullopt when init could not say.
  void count_processes(std::function<void(std::optional<int>)> done);
  // Stops the box; requests still pending fail with why, as BoxUnavailable with retry_after.
  void stop(std::string why, int retry_after = 0);

  bool accepting() const { return state_ == State::launching || state_ == State::starting || state_ == State::ready; }
  bool ready() const { return state_ == State::ready; }
  // "starting", "running", "stopping" or "stopped": GET /admin/accounts.
  const char* phase() const;
  size_t live_commands() const { return spawns_.size(); }
  std::chrono::steady_clock::time_point last_event() const { return last_event_; }
  BoxStrand strand() const { return strand_; }

 private:
  enum class State { launching, starting, ready, stopping, gone };
  using Clock = std::chrono::steady_clock;

  // A request sent or queued, waiting for init's reply.
  struct Pending {
    uint64_t id = 0;  // 0: init's answer to the start
    std::function<void(protocol::InitReply&, std::vector<UniqueFd>&)> on_reply;
    std::function<void(const std::string& why)> on_fail;
    Clock::time_point deadline{};  // set when it reaches the head of the line
  };
  struct Outgoing {
    std::string data;
    std::vector<UniqueFd> fds;
  };
  struct SpawnEntry {
    SpawnHandlers handlers;
    bool started = false;
    std::optional<int> early_exit;  // its exit came before its Spawned reply was read
    int pid = 0;                    // in the box's pid namespace, once started (the audit's)
  };

  void queue(std::string data, std::vector<UniqueFd> fds, Pending pending);
  void flush();
  void read_control();
  void read_events();
  void on_reply(protocol::Message& m);
  void on_exit(uint64_t spawn, int status);
  void arm_timer();
  void fail_all(const std::string& why);
  void finish();
  uint64_t next_request_id() { return next_request_id_++; }

  BoxStrand strand_;
  FairPool& blocking_;
  std::string name_;
  Options options_;
  OnGone on_gone_;
  State state_ = State::launching;
  std::unique_ptr<LaunchedBox> box_;
  std::optional<boost::asio::posix::stream_descriptor> control_, events_;
  boost::asio::steady_timer timer_;
  Clock::time_point start_deadline_;
  bool writing_ = false;  // waiting for room on the control socket
  std::deque<Outgoing> outbox_;
  std::deque<Pending> awaiting_;  // in the order init answers
  std::map<uint64_t, SpawnEntry> spawns_;
  uint64_t next_request_id_ = 1;  // requests other than Spawn (which bring their own ids)
  Clock::time_point last_event_ = Clock::now();
  std::string stop_why_;
  int retry_after_ = 0;  // told to requests that fail with the stop
  // For /metrics: when the start began, and what a stop before "ready" counts as.
  Clock::time_point created_ = Clock::now();
  metrics::StartFailure start_failure_ = metrics::StartFailure::stopped;
};

}  // namespace agentbox
