#pragma once
// One cgroup per box with memory, pids and cpu limits and usage readings, behind one interface
// for cgroup v2 and v1 (DESIGN §3). The driver is chosen once at startup (detect()).
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "box/box_spec.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {

struct CgroupUsage {
  uint64_t memory_bytes = 0;       // current memory use
  uint64_t memory_peak_bytes = 0;  // high-water mark (0 if the kernel does not report it)
  uint64_t pids = 0;               // current tasks
  uint64_t cpu_usec = 0;           // total CPU time used
  uint64_t oom_kills = 0;          // processes killed by this cgroup's memory limit
};

// What a group is for. Usage readings need every controller; a box whose usage nobody reads
// (`agentbox run`) needs on v1 only the hierarchies whose limits it sets, and pids always (what
// stops a fork bomb). Each v1 hierarchy joined costs a mkdir, an attach and an rmdir per box.
enum class CgroupUse { limits_and_usage, limits_only };

class Cgroup {
 public:
  virtual ~Cgroup() = default;
  // Moves pid (and, for v1, into every controller) into this cgroup.
  virtual void attach(pid_t pid) = 0;
  // v2: a directory fd for clone3(CLONE_INTO_CGROUP); -1 when the driver has none (v1).
  virtual int clone_into_fd() const { return -1; }
  // v1: the group's `tasks` file in each hierarchy, open for writing. A single-threaded process
  // that writes "0" to each moves itself in without the attach's threadgroup lock, whose RCU
  // grace period costs 10-15 ms per attach once starts are more than a few ms apart. The
  // kernel checks the opener's credentials, so the fds work in the box's init before it drops
  // them. Empty when the driver has no such way (v2): attach() then.
  virtual std::vector<UniqueFd> open_self_join() const { return {}; }
  // Readings of controllers the group was not made with (CgroupUse::limits_only) are 0.
  virtual CgroupUsage usage() const = 0;
  // Kills every task in the group (v2 cgroup.kill or a SIGKILL sweep) and removes the
  // directories, retrying briefly while the kernel finishes exiting tasks. Idempotent.
  virtual void destroy() = 0;
  virtual std::string path() const = 0;  // for logs and doctor
};

class CgroupDriver {
 public:
  virtual ~CgroupDriver() = default;
  // "v2" or "v1".
  virtual std::string kind() const = 0;
  // Whether its groups offer clone_into_fd(): a box is then cloned straight into its group,
  // else (v1) it is attached after the clone, while init already builds the box.
  virtual bool clones_into() const { return false; }
  // Creates group `name` (unique per box) under agentbox's parent group with the limits.
  virtual std::unique_ptr<Cgroup> create(const std::string& name, const Limits& limits,
                                         CgroupUse use = CgroupUse::limits_and_usage) = 0;

  // Chooses v2 when the unified hierarchy at root has the memory, pids and cpu controllers
  // available to agentbox's parent group, else v1 when those controllers are mounted as v1
  // hierarchies, else nullptr (with the reason in *why). `root` is /sys/fs/cgroup except in
  // tests, which point it at a fake tree.
  static std::unique_ptr<CgroupDriver> detect(const std::string& root = "/sys/fs/cgroup", std::string* why = nullptr);
};

}  // namespace agentbox
