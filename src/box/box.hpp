#pragma once
// A box used by one caller at a time, in turn: `agentbox run`, the benchmarks and the tests.
// Each request waits for its reply; exits are read from the event socket when the caller
// polls it. The daemon does not use this class: it owns each box asynchronously (BoxOwner).
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "box/launch.hpp"
#include "box/messages.hpp"
#include "box/spawn_result.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {

struct ExitEvent {
  uint64_t id = 0;  // the Spawn's id
  int status = 0;   // raw wait status
};

class Box {
 public:
  // Launches the box (launch_box) and, unless opts.await_ready is false, waits for init's
  // answer. Throws agentbox::Error naming the failed step.
  static std::unique_ptr<Box> start(const BoxSpec& spec, const BoxStartOptions& opts);
  ~Box();
  Box(const Box&) = delete;
  Box& operator=(const Box&) = delete;

  // Starts a command. Pipes mode: stdio holds 3 fds (in, out, err) that become the command's.
  // Throws SpawnError when the command could not be executed.
  SpawnResult spawn(const SpawnRequest& req, std::span<const int> stdio = {});
  // Signals the process group of the command started as spawn `id` (whole_session: every
  // process of its session); false when it had already ended (nothing was signalled).
  bool signal(uint64_t id, int sig, bool whole_session = false);
  // The TCP listeners in the box.
  std::vector<protocol::ListeningPort> list_ports();
  // Processes inside besides init.
  int process_count();

  // Event socket: readable when an exit is queued or init is gone.
  int event_fd() const { return box_->events.get(); }
  // Reads queued exits without blocking. *init_gone becomes true when init has exited.
  std::vector<ExitEvent> read_events(bool* init_gone);

  CgroupUsage usage() const;
  // Kills everything in the box, reaps init, removes the cgroup. Idempotent. Throws
  // agentbox::Error if the cgroup stayed (everything else is done).
  void stop();
  bool stopped() const { return stopped_; }

  pid_t init_pid() const { return box_->init_pid; }
  int landlock_abi() const { return landlock_abi_; }  // known once init is ready
  const BoxSpec& spec() const { return box_->spec; }
  const StartPlan& plan() const { return box_->plan; }

 private:
  Box() = default;
  // Reads init's answer to the start if still unread: ready, or the start error (thrown).
  void take_ready();
  // Sends a request and returns init's reply to it (after init's answer to the start).
  protocol::InitReply request(const nlohmann::json& msg, std::span<const int> fds, int timeout_ms, const char* what,
                              std::vector<UniqueFd>* reply_fds = nullptr);

  std::unique_ptr<LaunchedBox> box_;
  int landlock_abi_ = 0;
  bool ready_pending_ = false;  // init's answer to the start is still unread
  int ready_timeout_ms_ = 10000;
  uint64_t next_id_ = 1;
  bool stopped_ = false;
};

}  // namespace agentbox
