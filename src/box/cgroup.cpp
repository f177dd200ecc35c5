// Chooses the cgroup driver once (DESIGN §3): the fallback order lives in detect() only.
#include "box/cgroup.hpp"

#include <algorithm>

#include "box/cgroup_drivers.hpp"

namespace agentbox {

uint64_t cpu_quota_usec(uint32_t millicores) {
  if (millicores == 0) return 0;
  constexpr uint64_t kMinQuotaUsec = 1000;  // the kernel refuses smaller quotas
  return std::max<uint64_t>(uint64_t{millicores} * kCpuPeriodUsec / 1000, kMinQuotaUsec);
}

// On success *why (when given) says what was chosen and why the earlier choice was not,
// e.g. "v1: memory at /sys/fs/cgroup/memory, ... (v2: .../unified/cgroup.controllers lacks
// memory, pids, cpu)"; doctor prints it.
std::unique_ptr<CgroupDriver> CgroupDriver::detect(const std::string& root, std::string* why) {
  std::string found, v2_why_not, v1_why_not;
  // 1. v2: the norm, and the only version with cgroup.kill and CLONE_INTO_CGROUP.
  if (auto driver = make_cgroup_v2_driver(root, &found, &v2_why_not)) {
    if (why) *why = found;
    return driver;
  }
  // 2. v1: hosts that still bind the controllers to v1 hierarchies (our CI machines).
  if (auto driver = make_cgroup_v1_driver(root, &found, &v1_why_not)) {
    if (why) *why = found + " (v2: " + v2_why_not + ")";
    return driver;
  }
  // 3. none: box start refuses limits it cannot enforce.
  if (why) *why = "no usable cgroups: v2: " + v2_why_not + "; v1: " + v1_why_not;
  return nullptr;
}

}  // namespace agentbox
