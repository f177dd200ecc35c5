#pragma once
// The parent's half of a box start (DESIGN §3, "Creation"): carry out the start plan
// (box/start_plan.hpp) — clone init into its namespaces, do what only the parent can (id maps,
// the cgroup) and hand init its StartBox — and return init's process and sockets without
// waiting for its answer. Blocking system calls of a few milliseconds: the daemon runs it on a
// launcher thread, never on its event loop.
//
// Whoever holds the LaunchedBox owns the box: a Box (`agentbox run`, tests: one caller, in turn)
// or a BoxOwner (the daemon: asynchronous, on the account's strand).
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "box/box_spec.hpp"
#include "box/cgroup.hpp"
#include "box/start_plan.hpp"
#include "box/zygote.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {

struct BoxStartOptions {
  std::string init_path;            // the agentbox-init binary (see default_init_path())
  int netns_fd = -1;                // join this persistent netns; -1: a fresh one
  CgroupDriver* cgroups = nullptr;  // required when spec.use_cgroup
  std::string cgroup_name;          // unique name of the box's group
  // limits_only: nobody reads this box's usage (`agentbox run`); see CgroupUse.
  CgroupUse cgroup_use = CgroupUse::limits_and_usage;
  bool legacy_mount_api = false;  // force the mount(2) fallback (tests)
  // Clone init from this zygote instead of clone+exec (host_uid boxes; the daemon's way).
  Zygote* zygote = nullptr;
  std::chrono::milliseconds ready_timeout{10000};  // Box: how long init may take to answer
  // Box: false returns once init has its spec; the first request then waits for init's ready
  // (and throws its start error) before its own reply. `agentbox run` sends its command this
  // way, so init runs it without waiting for a round trip through the parent.
  bool await_ready = true;
  bool hold_before_ready = false;  // test hook: init contains itself and never answers
  const HostCaps* caps = nullptr;  // null: HostCaps::probe() for this start
  // A parent-built /etc comes from the shared snapshots in this directory (box/etc_snapshots.hpp;
  // `agentbox run`: kRunEtcSnapshots); "": a tree of the box's own.
  std::string etc_snapshots;
  // A copy of the caller becomes init, without exec'ing agentbox-init (ClonePath::in_place;
  // `agentbox run`). The caller must have one thread and no signal handlers: init runs on with
  // both as they were at the clone.
  bool init_in_place = false;
};

// A started box: init in its namespaces, its sockets and its cgroup. Ending it (end() or the
// destructor) kills init, and with it everything in its pid namespace, and removes the cgroup.
struct LaunchedBox {
  BoxSpec spec;
  StartPlan plan;
  pid_t init_pid = -1;        // in the caller's pid namespace
  UniqueFd pidfd;             // init's: signal and wait without pid reuse races
  bool init_is_child = true;  // false when the zygote cloned it: its end is polled, not reaped
  UniqueFd control;           // requests and replies (messages.hpp)
  UniqueFd events;            // exits
  std::unique_ptr<Cgroup> cgroup;
  bool cgroup_confirmed = true;  // init was told it is in its cgroup (or needed not be)
  std::string etc_fallback;      // why /etc is init's copy instead of the planned source
  UniqueFd etc_hold;             // the /etc snapshot's lock while init lives (box/etc_snapshots.hpp)

  LaunchedBox() = default;
  LaunchedBox(LaunchedBox&&) = default;
  LaunchedBox& operator=(LaunchedBox&&) = delete;
  ~LaunchedBox();
  // Kills init, waits until it is gone, removes the cgroup. Idempotent; blocks briefly. Throws
  // agentbox::Error if the cgroup could not be removed (everything else is done by then).
  void end();
};

// Starts spec's box as planned for this offer and host. Throws agentbox::Error naming the step.
std::unique_ptr<LaunchedBox> launch_box(const BoxSpec& spec, const BoxStartOptions& opts);

// Where agentbox-init lives: $AGENTBOX_INIT, else next to the running binary, else the build
// tree's copy (tests), else the install location.
std::string default_init_path();

}  // namespace agentbox
