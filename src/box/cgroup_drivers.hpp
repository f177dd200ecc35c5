#pragma once
// Internal: the two cgroup drivers behind CgroupDriver. Each factory returns nullptr and says
// why when its hierarchy is not usable here; CgroupDriver::detect (cgroup.cpp) decides the order.
#include <cstdint>
#include <memory>
#include <string>

#include "box/cgroup.hpp"

namespace agentbox {

// Controllers a box's limits need, in both versions.
inline constexpr const char* kRequiredControllers[] = {"memory", "pids", "cpu"};

// CPU bandwidth: quota per period, both in microseconds.
inline constexpr uint64_t kCpuPeriodUsec = 100000;
// millicores * period / 1000, raised to the kernel's minimum quota of 1 ms; 0 = no limit.
uint64_t cpu_quota_usec(uint32_t millicores);

// Unified hierarchy at root (or root/unified on hybrid hosts) with memory, pids and cpu
// available; enables them for <v2 root>/agentbox. On success *found describes it.
std::unique_ptr<CgroupDriver> make_cgroup_v2_driver(const std::string& root, std::string* found, std::string* why_not);

// memory, pids and cpu (cpuacct optional, for usage) mounted as v1 hierarchies under root,
// found in /proc/self/mounts, else as directories root/<controller> (fake trees in tests).
std::unique_ptr<CgroupDriver> make_cgroup_v1_driver(const std::string& root, std::string* found, std::string* why_not);

}  // namespace agentbox
