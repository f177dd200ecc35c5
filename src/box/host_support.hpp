#pragma once
// What this host offers that agentbox uses, probed once; `agentbox doctor` prints it and box
// start refuses to run without what is required (never a silent downgrade).
#include <string>
#include <vector>

namespace agentbox {

struct HostFeature {
  std::string name;  // "landlock", "seccomp", "user namespaces", "cgroup memory", ...
  bool present = false;
  bool required = false;  // required for what agentbox will enforce in this mode
  std::string detail;     // what was found ("ABI 7", "v1 at /sys/fs/cgroup/memory")
  std::string fix;        // how to fix it when missing
};

// as_root: the daemon/`run` as root (host uids, cgroups required) vs. an ordinary user
// (user namespaces required, cgroups optional).
std::vector<HostFeature> probe_host(bool as_root);

}  // namespace agentbox
