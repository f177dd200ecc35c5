#pragma once
// What a root daemon needs from the container it runs in (a Kubernetes pod, Docker, a
// hardened systemd unit): its capabilities, the syscalls a runtime's seccomp profile may
// refuse, a writable cgroup2, a /proc without masks where a box's fresh /proc needs one, and
// whether it runs in a user namespace. `agentbox doctor` lists each as a HostFeature; the
// manifests in deploy/k8s add exactly kDaemonCapabilities (tests/deploy compares them with
// what doctor prints).
#include <linux/capability.h>

#include <cstdint>
#include <string>
#include <vector>

#include "box/host_support.hpp"

namespace agentbox {

struct CapabilityNeed {
  const char* name;  // as Kubernetes spells it (capabilities.add), without CAP_
  int cap;           // CAP_*
  const char* why;
};

// The daemon's capabilities, the one list: a box start fails without any of them.
inline constexpr CapabilityNeed kDaemonCapabilities[] = {
    {"SYS_ADMIN", CAP_SYS_ADMIN, "namespaces, mounts, pivot_root, setns, sethostname, loop devices"},
    {"NET_ADMIN", CAP_NET_ADMIN, "brings up lo in each box's network namespace"},
    {"SETUID", CAP_SETUID, "a box becomes its account's uid; file routes use setfsuid"},
    {"SETGID", CAP_SETGID, "a box becomes its account's gid, setgroups"},
    {"SETPCAP", CAP_SETPCAP, "a box drops its bounding set"},
    {"CHOWN", CAP_CHOWN, "homes and volumes belong to the account's uid"},
    {"FOWNER", CAP_FOWNER, "sets modes and times on files of account uids"},
    {"DAC_OVERRIDE", CAP_DAC_OVERRIDE, "reads and writes homes of account uids, mode 0700"},
    {"KILL", CAP_KILL, "signals processes of account uids in boxes"},
};

// The names of kDaemonCapabilities missing from a CapEff mask, in the list's order.
std::vector<std::string> missing_capabilities(uint64_t cap_eff);

// The hex value of a "Key:\tHEX" line of /proc/PID/status (CapEff, CapBnd); throws if absent.
uint64_t status_hex(const std::string& status, const std::string& key);

// True for the initial user namespace's map "0 0 4294967295" (hostUsers: true).
bool uid_map_is_identity(const std::string& uid_map);

// Mount points under /proc in a /proc/self/mountinfo text: the masks a runtime lays over
// /proc/kcore, /proc/keys, ... (procMount: Default). The kernel refuses a fresh procfs in a
// user namespace other than the initial one while /proc has any.
std::vector<std::string> proc_masks(const std::string& mountinfo);

// The container-facing features, probed in this process: capabilities (as root), the seccomp
// profile around this process, cgroup2 writability, /proc masks, the user namespace.
std::vector<HostFeature> probe_pod_needs(bool as_root);

}  // namespace agentbox
