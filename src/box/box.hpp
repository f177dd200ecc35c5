#pragma once
// A running box, seen from the daemon (or `agentbox run`): its init process, its two sockets,
// its cgroup. Thread-safe: requests on the control socket are serialized by a mutex, events
// are read by one owner (BoxManager's event thread or the CLI loop).
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "box/box_spec.hpp"
#include "box/cgroup.hpp"
#include "box/protocol.hpp"
#include "box/zygote.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {

struct BoxStartOptions {
  std::string init_path;             // the agentbox-init binary (see default_init_path())
  int netns_fd = -1;                 // join this persistent netns; -1: a fresh one
  CgroupDriver* cgroups = nullptr;   // required when spec.use_cgroup
  std::string cgroup_name;           // unique name of the box's group
  // limits_only: nobody reads this box's usage (`agentbox run`); see CgroupUse.
  CgroupUse cgroup_use = CgroupUse::limits_and_usage;
  bool legacy_mount_api = false;     // force the mount(2) fallback (tests)
  // Clone init from this zygote instead of clone+exec (host_uid boxes; the daemon's way).
  Zygote* zygote = nullptr;
  std::chrono::milliseconds ready_timeout{10000};
  // false: start() returns once init has its spec, and the first request waits for init's
  // ready (and throws its start error) before its own reply. `agentbox run` sends its command
  // this way, so init runs it without waiting for a round trip through the parent.
  bool await_ready = true;
};

struct SpawnResult {
  pid_t pid = 0;         // pid inside the box (its process group id too)
  UniqueFd pty_master;   // tty mode: the master side of the box's pty
};

struct ExitEvent {
  pid_t pid = 0;    // pid inside the box
  int status = 0;   // raw wait status
};

// The spawn failed before the command ran (exec or cwd error); errno says which.
class SpawnError : public Error {
 public:
  using Error::Error;
};

class Box {
 public:
  // Clones init into new namespaces, sets up what the parent must, sends the spec and waits
  // for "ready" (unless opts.await_ready is false). Throws agentbox::Error naming the failed step.
  static std::unique_ptr<Box> start(const BoxSpec& spec, const BoxStartOptions& opts);
  ~Box();
  Box(const Box&) = delete;
  Box& operator=(const Box&) = delete;

  // Starts a command. Pipes mode: stdio holds 3 fds (in, out, err) that become the command's.
  // Throws SpawnError when the command could not be executed.
  SpawnResult spawn(const SpawnRequest& req, std::span<const int> stdio = {});
  // Signals the process group led by pid.
  void signal(pid_t pid, int sig);
  // Processes inside besides init.
  int process_count();

  // Event socket: readable when an exit is queued or init is gone.
  int event_fd() const { return events_.get(); }
  // Reads queued exits without blocking. *init_gone becomes true when init has exited.
  std::vector<ExitEvent> read_events(bool* init_gone);

  CgroupUsage usage() const;
  // Kills everything in the box, reaps init, removes the cgroup. Idempotent.
  void stop();
  bool stopped() const { return stopped_; }

  pid_t init_pid() const { return init_pid_; }
  int landlock_abi() const { return landlock_abi_; }  // known once init is ready
  const BoxSpec& spec() const { return spec_; }

 private:
  Box() = default;
  // Reads init's answer to its spec if still unread: ready, or the start error (thrown).
  void take_ready();
  // Sends a request to init and returns its reply (after init's ready, if that is unread).
  protocol::Message request(const nlohmann::json& msg, std::span<const int> fds, int timeout_ms, const char* what);

  BoxSpec spec_;
  pid_t init_pid_ = -1;
  UniqueFd pidfd_;          // init's pidfd: signal and reap without pid reuse races
  bool init_is_child_ = true;  // false when a zygote cloned it: then its end is polled, not reaped
  UniqueFd control_;        // request/reply with init (guarded by mu_)
  UniqueFd events_;         // exit events from init
  std::unique_ptr<Cgroup> cgroup_;
  int landlock_abi_ = 0;
  bool ready_pending_ = false;    // init's answer to the spec is still unread (guarded by mu_)
  bool cgroup_confirmed_ = true;  // init was told it is in its cgroup (or needed not be)
  int ready_timeout_ms_ = 10000;
  uint64_t next_id_ = 1;
  bool stopped_ = false;
  std::mutex mu_;
};

// Where agentbox-init lives: $AGENTBOX_INIT, else next to the running binary, else the build
// tree's copy (tests), else the install location.
std::string default_init_path();

}  // namespace agentbox
