// Host probes for `agentbox doctor` and box start. Each probe tries the real thing where that
// is cheap (a short-lived child unshares a namespace; openat2 resolves beneath "/"), so a
// kernel that has a feature configured but blocked (a container's seccomp profile, a
// sysctl, an LSM) is reported as missing. Every child is reaped and every fd closed.
#include "box/host_support.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <string>

#include "box/cgroup.hpp"
#include "box/pod_needs.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

struct NamespaceProbe {
  const char* name;
  int flag;
  const char* flag_name;
  const char* fix;
};

// The namespaces a box is made of (DESIGN §3), in the order doctor lists them.
constexpr NamespaceProbe kNamespaces[] = {
    {"user namespaces", CLONE_NEWUSER, "CLONE_NEWUSER",
     "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
     "user.max_user_namespaces > 0; on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), "
     "or run agentbox as root"},
    {"network namespaces", CLONE_NEWNET, "CLONE_NEWNET",
     "use a kernel with CONFIG_NET_NS; in a container, allow unshare(2) (e.g. --privileged)"},
    {"mount namespaces", CLONE_NEWNS, "CLONE_NEWNS",
     "in a container, allow unshare(2) (e.g. --privileged or a seccomp profile that permits it)"},
    {"pid namespaces", CLONE_NEWPID, "CLONE_NEWPID",
     "use a kernel with CONFIG_PID_NS; in a container, allow unshare(2)"},
    {"ipc namespaces", CLONE_NEWIPC, "CLONE_NEWIPC",
     "use a kernel with CONFIG_IPC_NS; in a container, allow unshare(2)"},
    {"uts namespaces", CLONE_NEWUTS, "CLONE_NEWUTS",
     "use a kernel with CONFIG_UTS_NS; in a container, allow unshare(2)"},
    {"cgroup namespaces", CLONE_NEWCGROUP, "CLONE_NEWCGROUP",
     "use a kernel with CONFIG_CGROUPS (4.6+); in a container, allow unshare(2)"},
};

std::string errno_text(int err) {
  return std::string(strerrorname_np(err) ? strerrorname_np(err) : "?") + " (" + std::strerror(err) + ")";
}

constexpr size_t kNamespaceCount = std::size(kNamespaces);
static_assert(kNamespaces[0].flag == CLONE_NEWUSER, "the child orders the user namespace by index");
constexpr int kNotTried = -1;

// Tries unshare(2) of every namespace in one throwaway child (one fork keeps the probe
// cheap), so this process keeps its own namespaces. Without root, the box lives in a user
// namespace, so the child makes that one first, as the box will; as root it comes last so
// the others are tried with host privileges. Returns 0 or the errno for each namespace, or
// kNotTried. The child only makes syscalls before _exit: safe in a multi-threaded caller.
std::array<int, kNamespaceCount> unshare_each_in_child(std::string* trouble) {
  std::array<int, kNamespaceCount> results;
  results.fill(kNotTried);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *trouble = "pipe2: " + errno_text(errno);
    return results;
  }
  UniqueFd from_child(fds[0]), to_parent(fds[1]);
  const bool userns_first = ::geteuid() != 0;
  const pid_t pid = ::fork();
  if (pid < 0) {
    *trouble = "fork: " + errno_text(errno);
    return results;
  }
  if (pid == 0) {
    for (size_t step = 0; step < kNamespaceCount; ++step) {
      // kNamespaces[0] is the user namespace: first or last.
      const size_t i = userns_first ? step : (step + 1) % kNamespaceCount;
      const int result[2] = {static_cast<int>(i), ::unshare(kNamespaces[i].flag) == 0 ? 0 : errno};
      if (::write(to_parent.get(), result, sizeof result) != sizeof result) ::_exit(1);
      if (userns_first && i == 0 && result[1] != 0) break;  // nothing else can work
    }
    ::_exit(0);
  }
  to_parent.reset();
  int result[2];
  ssize_t n;
  while ((n = ::read(from_child.get(), result, sizeof result)) == sizeof result || (n < 0 && errno == EINTR)) {
    if (n == sizeof result && result[0] >= 0 && static_cast<size_t>(result[0]) < kNamespaceCount)
      results[static_cast<size_t>(result[0])] = result[1];
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) *trouble = "the probe child was killed by signal " + std::to_string(WTERMSIG(status));
  return results;
}

HostFeature namespace_feature(const NamespaceProbe& ns, bool required, int result, const std::string& trouble) {
  HostFeature f{ns.name, result == 0, required, "", ns.fix};
  const std::string op = std::string("unshare(") + ns.flag_name + ")";
  if (result == 0)
    f.detail = op + " works";
  else if (result != kNotTried)
    f.detail = op + ": " + errno_text(result);
  else if (!trouble.empty())
    f.detail = op + " not tried: " + trouble;
  else
    f.detail = op + " not tried: needs a user namespace without root";
  return f;
}

HostFeature probe_max_user_namespaces(bool required) {
  HostFeature f{"max_user_namespaces", false, required, "", "sysctl user.max_user_namespaces=15000"};
  try {
    const std::string value = read_file("/proc/sys/user/max_user_namespaces", 64);
    const long n = std::stol(value);
    f.present = n > 0;
    f.detail = "user.max_user_namespaces = " + std::to_string(n);
  } catch (const std::exception& e) {
    f.detail = e.what();
  }
  return f;
}

// Landlock access kinds by the ABI that introduced them (the box uses the newest it finds).
std::string landlock_scope_of(long abi) {
  std::string s = "fs";
  if (abi >= 4) s += ", net";
  if (abi >= 6) s += ", scope";
  return s;
}

HostFeature probe_landlock() {
  HostFeature f{"landlock", false, true, "",
                "use a kernel with CONFIG_SECURITY_LANDLOCK (5.13+, 6.7+ for network rules) "
                "and landlock in the lsm= boot parameter"};
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 0) {
    f.detail = errno == EOPNOTSUPP ? "built in but disabled at boot" : "landlock_create_ruleset: " + errno_text(errno);
    return f;
  }
  f.present = true;
  // doctor's summary prints "Landlock " + this detail.
  f.detail = "ABI " + std::to_string(abi) + " (" + landlock_scope_of(abi) + ")";
  return f;
}

HostFeature probe_seccomp() {
  HostFeature f{"seccomp", false, true, "",
                "use a kernel with CONFIG_SECCOMP_FILTER (every distribution kernel has it)"};
  const int mode = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
  if (mode < 0) {
    f.detail = "prctl(PR_GET_SECCOMP): " + errno_text(errno);
    return f;
  }
  uint32_t action = SECCOMP_RET_ERRNO;  // what the deny-list returns
  if (::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
    f.detail = "seccomp(SECCOMP_GET_ACTION_AVAIL, ERRNO): " + errno_text(errno);
    return f;
  }
  const scmp_version* v = seccomp_version();
  f.present = true;
  f.detail = "filters with SECCOMP_RET_ERRNO; libseccomp " + std::to_string(v->major) + "." + std::to_string(v->minor) +
             "." + std::to_string(v->micro);
  if (mode == 2) f.detail += "; this process is already filtered (filters stack)";
  return f;
}

HostFeature probe_no_new_privs() {
  HostFeature f{"no_new_privs", false, true, "", "use a kernel 3.5 or newer"};
  const int nnp = ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
  f.present = nnp >= 0;
  f.detail = f.present ? (nnp ? "supported (already set here)" : "supported")
                       : "prctl(PR_GET_NO_NEW_PRIVS): " + errno_text(errno);
  return f;
}

// The file API resolves every path with openat2(home, path, RESOLVE_BENEATH...): check that
// it resolves inside and refuses to climb out.
HostFeature probe_openat2() {
  HostFeature f{"openat2", false, true, "", "use a kernel 5.6 or newer"};
  UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    f.detail = "open(/): " + errno_text(errno);
    return f;
  }
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  UniqueFd inside(static_cast<int>(::syscall(SYS_openat2, root.get(), ".", &how, sizeof how)));
  if (!inside) {
    f.detail = "openat2(/, \".\", RESOLVE_BENEATH): " + errno_text(errno);
    return f;
  }
  UniqueFd outside(static_cast<int>(::syscall(SYS_openat2, inside.get(), "..", &how, sizeof how)));
  if (outside || errno != EXDEV) {
    f.detail = "openat2(\"..\", RESOLVE_BENEATH) was not refused with EXDEV";
    return f;
  }
  f.present = true;
  f.detail = "RESOLVE_BENEATH enforced";
  return f;
}

HostFeature probe_pidfd_open() {
  HostFeature f{"pidfd_open", false, true, "", "use a kernel 5.3 or newer"};
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
  f.present = static_cast<bool>(pidfd);
  f.detail = f.present ? "supported" : "pidfd_open: " + errno_text(errno);
  return f;
}

HostFeature probe_cgroups(bool as_root) {
  HostFeature f{"cgroups", false, as_root, "",
                "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) offering memory, pids "
                "and cpu, or mount the v1 memory, pids and cpu hierarchies under /sys/fs/cgroup; "
                "limits need root"};
  std::string why;
  f.present = CgroupDriver::detect("/sys/fs/cgroup", &why) != nullptr;
  f.detail = why;  // starts with "v1" or "v2" when present; doctor's summary relies on it
  return f;
}

HostFeature probe_loop_devices() {
  HostFeature f{"loop devices", false, false, "",
                "modprobe loop; in a container, the host's loop devices (Kubernetes: the privileged "
                "overlay, docs/DEPLOY.md) or [accounts] disk = \"0\""};
  // Opening it is what a container's device cgroup refuses (EPERM) where the node exists.
  UniqueFd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  f.present = static_cast<bool>(control);
  f.detail = f.present ? "/dev/loop-control opens read-write" : "open(/dev/loop-control): " + errno_text(errno);
  return f;
}

// Informational: where a crashing box process's core goes is the host's choice.
HostFeature probe_core_pattern() {
  HostFeature f{"core_pattern", true, false, "", ""};
  try {
    std::string pattern = read_file("/proc/sys/kernel/core_pattern", 4096);
    while (!pattern.empty() && pattern.back() == '\n') pattern.pop_back();
    // Boxes set RLIMIT_CORE to 0: that stops core files, but a piped pattern ignores it.
    f.detail = !pattern.empty() && pattern[0] == '|'
                   ? "piped to a host helper (" + pattern + "): RLIMIT_CORE=0 does not stop it"
                   : "\"" + pattern + "\": no core files in boxes (RLIMIT_CORE=0)";
  } catch (const Error& e) {
    f.detail = e.what();
  }
  return f;
}

}  // namespace

std::vector<HostFeature> probe_host(bool as_root) {
  std::vector<HostFeature> features;
  std::string trouble;
  const auto unshared = unshare_each_in_child(&trouble);
  for (size_t i = 0; i < kNamespaceCount; ++i) {
    // A root daemon gives boxes host uids; an ordinary user needs a user namespace.
    const bool required = kNamespaces[i].flag != CLONE_NEWUSER || !as_root;
    features.push_back(namespace_feature(kNamespaces[i], required, unshared[i], trouble));
  }
  features.push_back(probe_max_user_namespaces(!as_root));
  features.push_back(probe_landlock());
  features.push_back(probe_seccomp());
  features.push_back(probe_no_new_privs());
  features.push_back(probe_openat2());
  features.push_back(probe_pidfd_open());
  features.push_back(probe_cgroups(as_root));
  features.push_back(probe_loop_devices());
  features.push_back(probe_core_pattern());
  // What the container around the daemon grants (a pod, Docker, a systemd unit).
  for (HostFeature& f : probe_pod_needs(as_root)) features.push_back(std::move(f));
  return features;
}

}  // namespace agentbox
