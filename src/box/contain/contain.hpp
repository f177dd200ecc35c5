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
// throws and the box never reports ready (fail closed).
// etc: where /etc comes from (see mounts::apply_in_child).
ContainResult contain(const BoxSpec& spec, int netns_fd, mounts::Api mount_api,
                      const std::function<void()>& await_cgroup, mounts::EtcSource etc = {});

}  // namespace agentbox
