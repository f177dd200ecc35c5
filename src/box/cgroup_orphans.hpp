#pragma once
// The groups a daemon killed with SIGKILL leaves behind: "box-<its pid>-<serial>" under agentbox/
// in every cgroup hierarchy (v1: memory, pids, cpu, cpuacct; v2 wherever it is mounted), with
// whatever still ran in them. A daemon sweeps them at start, before its first box: a group whose
// owner is gone (no such pid, or a pid that is not an agentbox now) has its tasks killed
// (cgroup.kill where the kernel has it, else SIGKILL sweeps until rmdir succeeds) and is removed.
// A live daemon's groups are never touched; groups named with the sweeper's own pid can only be a
// predecessor's (the pid reused, as pid 1 in a container), so they go too.
//
// Runs on: the daemon's main thread, at start.
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox {

struct OrphanSweep {
  size_t groups = 0;                // group directories removed (one per hierarchy)
  size_t tasks_killed = 0;          // tasks SIGKILLed by sweeps (cgroup.kill's are not counted)
  std::vector<std::string> failed;  // "rmdir(DIR): ..." for groups that would not go
};

// The agentbox/ directory of each cgroup hierarchy (cgroup and cgroup2 mounts) under root that has one.
std::vector<std::string> agentbox_group_parents(const std::string& root = "/sys/fs/cgroup");

// The pid in a box group's name ("box-<pid>-<serial>"); nullopt for any other name.
std::optional<pid_t> group_owner(std::string_view name);

// Whether pid is a running agentbox (its /proc/PID/exe is named like this process's): a live
// daemon or `agentbox run`, whose groups are theirs.
bool is_live_agentbox(pid_t pid);

// Kills and removes, under each parent, the box groups of owners that are not alive (and those
// named with this process's pid). owner_alive is is_live_agentbox but in tests.
OrphanSweep reap_orphan_groups(const std::vector<std::string>& parents,
                               const std::function<bool(pid_t)>& owner_alive = is_live_agentbox);

}  // namespace agentbox
