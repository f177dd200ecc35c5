#pragma once
// The containment order, in one place. Read contain.cpp to review the security order.
#include <functional>

#include "box/box_spec.hpp"
#include "box/contain/mounts.hpp"

namespace agentbox {

struct ContainResult {
  int landlock_abi = 0;  // ABI enforced (0 only with allow_without_landlock)
};

// Runs in agentbox-init (PID 1 of the box's new namespaces), single-threaded, after the daemon
// has set up what only the parent can (id maps; cgroup membership, or it is under way:
// await_cgroup returns once the daemon says init is in the box's cgroup). Any failing step
// throws, named as in box/start_steps.hpp, and the box never reports ready (fail closed).
ContainResult contain(const BoxSpec& spec, int netns_fd, bool legacy_mounts, const mounts::EtcFrom& etc,
                      const std::function<void()>& await_cgroup);

}  // namespace agentbox
