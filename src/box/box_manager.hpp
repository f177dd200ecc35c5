#pragma once
// The daemon's boxes, one per account (DESIGN §3, "Lifecycle"). Each account has a strand on the
// box loop; its box's owner (BoxOwner) and everything done to that box run there, so accounts
// never wait on one another. A box starts on first use: the blocking part of a start (network
// namespace, cgroup, the zygote's clone) runs on the manager's launcher threads, and starts of
// different accounts run side by side; requests queue in the new owner meanwhile. A box stops
// after its idle timeout when nothing runs in it (its home stays); an account whose box is gone
// gives back its network namespace after netns_linger. At most max_active boxes run at once.
//
// Runs on: the box loop, each account's work on its account's strand (BoxLoop::strand_of, the
// one ProcessTable uses too), the sweep on a strand of its own; the blocking half of starts and
// stops on the launchers (a FairPool named "launcher", one job per account at a time). Its
// public methods may be called from any thread but the destructor and stop_all() (not a loop
// thread).

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "box/box_owner.hpp"
#include "box/cgroup.hpp"
#include "box/launch.hpp"
#include "util/box_loop.hpp"

namespace agentbox {

struct BoxManagerOptions {
  std::string init_path = default_init_path();
  CgroupDriver* cgroups = nullptr;  // required for specs with use_cgroup
  // Host-uid boxes' inits are cloned by a zygote (box/zygote.hpp), started on first use;
  // false: clone+exec per box.
  bool zygote = true;
  std::chrono::milliseconds idle_timeout{15 * 60 * 1000};
  std::chrono::milliseconds sweep_interval{1000};    // how often idle boxes are looked for
  std::chrono::milliseconds start_timeout{30000};    // a start that takes longer fails
  std::chrono::milliseconds request_timeout{10000};  // init must answer a request within this
  // An account without a box keeps its network namespace this long, then releases it (a new
  // one is made on its next start).
  std::chrono::milliseconds netns_linger{15 * 60 * 1000};
  size_t max_active = 0;        // boxes starting or running at once; 0: no cap
  unsigned launch_threads = 2;  // threads for the blocking part of starts and stops (all accounts)
  // An account's network namespace was made (on a launcher thread, before its first box
  // joins it) / is given back: the daemon puts its egress listener there and takes it away.
  // Must not throw.
  std::function<void(const std::string& account, int netns_fd)> on_netns_created;
  std::function<void(const std::string& account)> on_netns_released;
  // A user_ns box (an ordinary user's `agentbox mcp`) has a network namespace of its own, made
  // inside its user namespace with its init, which no account keeps: this is called for each
  // one on a launcher thread, after init is cloned and before its first request, with init's
  // pid (the daemon's egress listener goes there). Must not throw.
  std::function<void(const std::string& account, pid_t init_pid)> on_own_netns;
  // Test hook: boxes of these accounts contain themselves and never answer their start.
  std::function<bool(const std::string& account)> hold_start;
};

class BoxManager {
 public:
  // Runs on `loop`, which must outlive the manager and be running while it is used.
  BoxManager(BoxLoop& loop, BoxManagerOptions opts);
  // shut_down().
  ~BoxManager();
  BoxManager(const BoxManager&) = delete;
  BoxManager& operator=(const BoxManager&) = delete;

  // Starts req in account's box, starting the box from spec first if it has none. Returns the
  // spawn's id at once; the handlers run later on the account's strand. Pipes mode: stdio
  // holds stdin, stdout, stderr, which the command gets (closed here once sent).
  uint64_t spawn(const std::string& account, const BoxSpec& spec, SpawnRequest req, std::vector<UniqueFd> stdio,
                 SpawnHandlers handlers);
  // Signals the process group of spawn `id` in account's box (whole_session: every process of
  // its session, background jobs included); done(false) when nothing was signalled (it had
  // ended, or the box is gone). done runs on the account's strand.
  void signal(const std::string& account, uint64_t id, int sig, std::function<void(bool)> done = {},
              bool whole_session = false);
  // The TCP listeners in account's box (empty without a running box); done on its strand.
  void list_ports(const std::string& account, std::function<void(std::vector<protocol::ListeningPort>)> done);
  // A TCP socket (non-blocking, close-on-exec) made in account's network namespace, so that
  // connecting it to 127.0.0.1 reaches the box's own loopback; done(fd) on a launcher thread, or
  // done(-1 fd, why) when the account has no box running.
  void open_socket_in_box(const std::string& account, int family, std::function<void(UniqueFd, std::string why)> done);
  // Counts as activity (API use), postponing the idle stop.
  void touch(const std::string& account);
  // Stops the account's box; done (may be empty) once it is gone or if there was none.
  void stop(const std::string& account, std::function<void()> done = {});
  // Stops the account's box for good (the account is being deleted): from now on nothing
  // starts a box for it in this run (spawns fail with BoxUnavailable); done once it is gone.
  void close(const std::string& account, std::function<void()> done);
  // Stops every box and waits for them to go (bounded); not from a loop thread.
  void stop_all();
  // For good: no box starts from now on, every box is stopped (bounded wait), the launchers
  // finish what they hold and are joined, the zygote goes. Idempotent; not from a loop thread.
  void shut_down();

  // What each account's box is doing: "starting", "running" or "stopping"; an account missing
  // from the map has no box. done runs once every account's strand has answered.
  void box_states(std::function<void(std::map<std::string, std::string>)> done);

  size_t running() const;        // boxes starting, running or stopping
  size_t accounts_held() const;  // accounts with state kept (a box or a network namespace)

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace agentbox
