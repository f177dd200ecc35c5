#pragma once
// How one box is started, decided in one place: a pure function of the box's spec, what the
// starter offers (a zygote, a persistent network namespace) and what the host can do. Box::start
// carries the plan out; init is told the parts it acts on (mount API, /etc source, cgroup wait).
// Every branch of the decision is a row of the table in start_plan_test.cpp.
#include <cstdint>
#include <string_view>

#include "box/box_spec.hpp"

namespace agentbox {

// What the host offers, probed once per process (HostCaps::probe) or set by tests.
struct HostCaps {
  bool new_mount_api = true;       // open_tree/mount_setattr (5.12); else mount(2)
  bool cgroup_clone_into = false;  // the cgroup driver can clone straight into a group (v2)
  // The parent may build a box's /etc as a detached tmpfs (fsopen, 5.2; root of the initial
  // user namespace): true for a root daemon or `agentbox run` as root.
  bool parent_builds_etc = false;

  static HostCaps probe(bool cgroup_clone_into);
};

// What the starter brings to this start.
struct StartOffer {
  bool zygote = false;               // a zygote can clone init (the daemon's way)
  bool netns = false;                // a persistent network namespace to join; else a new one
  bool force_legacy_mounts = false;  // tests: take the mount(2) path on a new kernel
  // The starter is single-threaded, has no signal handlers and may be init's image: a copy of
  // it becomes init without an exec (`agentbox run`: its own process, its own box).
  bool in_place = false;
};

// How init comes to be.
enum class ClonePath {
  zygote,       // the zygote clones an init from itself: one clone3, no exec (host uids only)
  vfork_exec,   // clone(CLONE_VM|CLONE_VFORK) and exec agentbox-init: nothing of ours is copied
  clone3_exec,  // clone3 that copies us, then exec: needed for CLONE_INTO_CGROUP or a user
                // namespace, whose parent writes the id maps before the child may go on
  in_place,     // clone3 that copies us, and the copy becomes init without an exec, as the
                // zygote's children do (StartOffer::in_place; box/init/init_in_place.hpp)
};

// When init enters the box's cgroup.
enum class CgroupTiming {
  none,              // no cgroup (an ordinary user's `agentbox run` without delegation)
  clone_into,        // born in it (clone3 CLONE_INTO_CGROUP, cgroup v2)
  join_after_clone,  // made while init builds the mounts; init waits for word (v1: then joins itself)
};

// Where the box's /etc comes from. Every source but init_copy may fail at run time; the
// fallback is init_copy (box/start_steps.hpp).
enum class EtcSource {
  zygote_template,  // a clone of the zygote's shared read-only template
  parent_tree,      // a tmpfs the parent fills while init execs
  init_copy,        // init copies the allowlisted host entries itself
};

struct StartPlan {
  ClonePath clone = ClonePath::vfork_exec;
  CgroupTiming cgroup = CgroupTiming::none;
  EtcSource etc = EtcSource::init_copy;
  bool legacy_mounts = false;  // build the root with mount(2)
  uint64_t clone_flags = 0;    // the namespaces (and CLONE_INTO_CGROUP, CLONE_PIDFD) init gets

  bool operator==(const StartPlan&) const = default;
};

StartPlan plan_start(const BoxSpec& spec, const StartOffer& offer, const HostCaps& caps);

std::string_view to_string(ClonePath p);
std::string_view to_string(CgroupTiming t);
std::string_view to_string(EtcSource s);

}  // namespace agentbox
