// Probes of what the container around the daemon grants (box/pod_needs.hpp). Each reads what
// the kernel reports for this process or tries a call with arguments the kernel refuses on its
// own, so a seccomp filter's refusal (EPERM, ENOSYS) tells apart from the kernel's answer and
// nothing is changed.
#include "box/pod_needs.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <sstream>

#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/mountinfo.hpp"

namespace agentbox {
namespace {

std::string errno_name(int err) {
  const char* name = strerrorname_np(err);
  return name ? name : std::to_string(err);
}

std::string joined(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

std::vector<std::string> needed_names() {
  std::vector<std::string> names;
  for (const auto& c : kDaemonCapabilities) names.push_back(c.name);
  return names;
}

HostFeature probe_capabilities(const std::string& status) {
  // `agentbox doctor` prints the whole list in the detail either way: the manifest test reads it.
  const std::string needed =
      "the " + std::to_string(std::size(kDaemonCapabilities)) + " needed (" + joined(needed_names(), " ") + ")";
  HostFeature f{"capabilities", false, true, "",
                "run the daemon as root with " + joined(needed_names(), ", ") +
                    " (Kubernetes: securityContext.capabilities.add; docs/DEPLOY.md)"};
  try {
    const std::vector<std::string> missing = missing_capabilities(status_hex(status, "CapEff"));
    f.present = missing.empty();
    if (f.present) {
      f.detail = "CapEff has all " + needed;
    } else {
      std::string lacks;
      for (const auto& c : kDaemonCapabilities) {
        if (std::find(missing.begin(), missing.end(), c.name) != missing.end())
          lacks += (lacks.empty() ? "" : ", ") + std::string(c.name) + " (" + c.why + ")";
      }
      f.detail = "CapEff lacks " + lacks + "; " + needed;
    }
  } catch (const Error& e) {
    f.detail = e.what();
  }
  return f;
}

struct SyscallTry {
  const char* name;
  long (*call)();
  int kernel_errno;  // what the kernel answers these arguments with when nothing filters it (0: success)
};

// Arguments no kernel acts on: an empty path, a NULL clone_args of size 0, no attribute to
// change (mount_setattr returns 0 before it looks at the fd).
constexpr SyscallTry kTries[] = {
    {"pivot_root", [] { return ::syscall(SYS_pivot_root, "", ""); }, ENOENT},
    {"clone3", [] { return ::syscall(SYS_clone3, nullptr, 0); }, EINVAL},
    {"mount_setattr",
     [] {
       mount_attr attr{};
       return ::syscall(SYS_mount_setattr, -1, "", AT_EMPTY_PATH, &attr, sizeof attr);
     },
     0},
};

// A runtime's default profile (Docker's, containerd's RuntimeDefault) refuses pivot_root even
// with CAP_SYS_ADMIN, and older ones clone3 and the new mount API.
HostFeature probe_seccomp_profile(const std::string& status, bool has_sys_admin) {
  HostFeature f{"seccomp profile", false, true, "",
                "run the daemon without a seccomp filter (Kubernetes: seccompProfile Unconfined) or "
                "with deploy/k8s/seccomp/agentbox.json (docs/DEPLOY.md)"};
  std::string mode;
  std::istringstream in(status);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Seccomp:", 0) == 0) mode = line.substr(line.find_first_not_of(" \t", 8));
  }
  if (mode == "0") {
    f.present = true;
    f.detail = "this process is not filtered (Seccomp: 0)";
    return f;
  }
  std::vector<std::string> refused, answered;
  for (const auto& t : kTries) {
    errno = 0;
    const long r = t.call();
    const int err = r < 0 ? errno : 0;
    if (err == t.kernel_errno)
      answered.push_back(t.name);
    else if (std::strcmp(t.name, "pivot_root") == 0 && err == EPERM && !has_sys_admin)
      answered.push_back("pivot_root untried (no CAP_SYS_ADMIN)");
    else
      refused.push_back(std::string(t.name) + ": " + (err ? errno_name(err) : "succeeded"));
  }
  f.present = refused.empty();
  f.detail = "this process is filtered (Seccomp: " + mode + "); " +
             (refused.empty() ? "it lets through " + joined(answered, ", ") : "it refuses " + joined(refused, ", "));
  return f;
}

// Under a container runtime /sys/fs/cgroup is read-only unless the runtime was told otherwise.
HostFeature probe_cgroup2_writable() {
  HostFeature f{"cgroup2 writable", false, false, "",
                "give the pod a writable cgroup2: containerd cgroup_writable, the CRI-O annotation "
                "io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw, GKE writableCgroups, else privileged "
                "(docs/DEPLOY.md)"};
  for (const char* dir : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    const std::string controllers = std::string(dir) + "/cgroup.controllers";
    if (::access(controllers.c_str(), F_OK) != 0) continue;
    struct statvfs st {};
    if (::statvfs(dir, &st) != 0) {
      f.detail = std::string("statvfs(") + dir + "): " + errno_name(errno);
      return f;
    }
    f.present = !(st.f_flag & ST_RDONLY);
    f.detail = std::string(dir) + (f.present ? " is mounted read-write" : " is mounted read-only");
    return f;
  }
  f.present = true;  // nothing to write to; the cgroups row says whether v1 serves instead
  f.detail = "no cgroup2 mount (a v1 host)";
  return f;
}

HostFeature probe_user_namespace(const std::string& uid_map) {
  HostFeature f{"user namespace", true, false, "", ""};
  std::string map = uid_map;
  while (!map.empty() && (map.back() == '\n' || map.back() == ' ')) map.pop_back();
  if (uid_map_is_identity(uid_map)) {
    f.detail = "the initial one (host uids; hostUsers: true)";
  } else {
    std::string one_line;
    for (char c : map) one_line += c == '\n' ? ';' : c;
    f.detail = "a user namespace of its own (uid_map " + one_line +
               "): account uids must lie inside the map; loop devices and quotactl belong to "
               "the host (set [accounts] disk = \"0\")";
  }
  return f;
}

HostFeature probe_proc_masks(const std::string& mountinfo, bool required) {
  HostFeature f{"/proc unmasked", false, required, "",
                "unmask /proc (Kubernetes: procMount: Unmasked, which needs hostUsers: false)"};
  const std::vector<std::string> masks = proc_masks(mountinfo);
  f.present = masks.empty();
  f.detail = masks.empty() ? "nothing mounted over /proc's entries"
                           : "masked (procMount Default): " + joined(masks, " ") +
                                 (required ? "; a box's fresh /proc is refused in a user namespace"
                                           : "; harmless with host users");
  return f;
}

}  // namespace

std::vector<std::string> missing_capabilities(uint64_t cap_eff) {
  std::vector<std::string> missing;
  for (const auto& c : kDaemonCapabilities) {
    if (!(cap_eff & (uint64_t{1} << c.cap))) missing.push_back(c.name);
  }
  return missing;
}

uint64_t status_hex(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) != 0) continue;
    try {
      return std::stoull(line.substr(key.size() + 1), nullptr, 16);
    } catch (const std::exception&) {
      break;
    }
  }
  throw Error("/proc/self/status: no " + key + " line", EINVAL);
}

bool uid_map_is_identity(const std::string& uid_map) {
  std::istringstream in(uid_map);
  uint64_t inside = 1, outside = 1, count = 0;
  std::string rest;
  return (in >> inside >> outside >> count) && !(in >> rest) && inside == 0 && outside == 0 && count == 4294967295u;
}

std::vector<std::string> proc_masks(const std::string& mountinfo) {
  std::vector<std::string> masks;
  for (const MountInfoEntry& e : parse_mountinfo(mountinfo))
    if (e.point.starts_with("/proc/") && !e.point.starts_with("/proc/sys/fs/binfmt_misc")) masks.push_back(e.point);
  return masks;
}

std::vector<HostFeature> probe_pod_needs(bool as_root) {
  std::vector<HostFeature> features;
  std::string status, uid_map, mountinfo;
  try {
    status = read_file("/proc/self/status", 1 << 16);
    uid_map = read_file("/proc/self/uid_map", 1 << 16);
    mountinfo = read_file("/proc/self/mountinfo", 16 << 20);
  } catch (const Error& e) {
    features.push_back({"capabilities", false, as_root, e.what(), "mount /proc"});
    return features;
  }
  const bool in_user_ns = !uid_map_is_identity(uid_map);
  if (as_root) {
    features.push_back(probe_capabilities(status));
    bool has_sys_admin = false;
    try {
      has_sys_admin = status_hex(status, "CapEff") & (uint64_t{1} << CAP_SYS_ADMIN);
    } catch (const Error&) {
    }
    features.push_back(probe_seccomp_profile(status, has_sys_admin));
    features.push_back(probe_cgroup2_writable());
  }
  features.push_back(probe_user_namespace(uid_map));
  // A box of `run` as an ordinary user is in a user namespace too.
  features.push_back(probe_proc_masks(mountinfo, in_user_ns || !as_root));
  return features;
}

}  // namespace agentbox
