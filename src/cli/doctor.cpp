#include "cli/doctor.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "box/agent_paths.hpp"
#include "config/server_config.hpp"
#include "config/units.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/loop_image_probe.hpp"
#include "util/unique_fd.hpp"

#include "box/contain/seccomp.hpp"
#include "box/host_support.hpp"
#include "box/start_steps.hpp"
#include "cli/trial_start.hpp"

namespace agentbox {
namespace {

const HostFeature* find(const std::vector<HostFeature>& features, const std::string& name) {
  for (const auto& f : features) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool has(const std::vector<HostFeature>& features, const std::string& name) {
  const HostFeature* f = find(features, name);
  return f && f->present;
}

std::string status_of(const HostFeature& f) {
  if (f.present) return "ok";
  return f.required ? "MISSING" : "absent";
}

void print_table(const std::vector<HostFeature>& features, std::ostream& out) {
  size_t name_w = std::string("feature").size(), status_w = std::string("MISSING").size();
  for (const auto& f : features) name_w = std::max(name_w, f.name.size());
  auto row = [&](const std::string& name, const std::string& status, const std::string& need,
                 const std::string& detail) {
    out << name << std::string(name_w + 2 - name.size(), ' ') << status
        << std::string(status_w + 2 - status.size(), ' ') << need << std::string(10 - need.size(), ' ') << detail
        << '\n';
  };
  row("feature", "status", "need", "detail");
  for (const auto& f : features) row(f.name, status_of(f), f.required ? "required" : "optional", f.detail);
}

void print_summary(const std::vector<HostFeature>& features, bool as_root, std::ostream& out) {
  out << "\nagentbox will enforce:\n";
  std::string namespaces;
  for (const auto& f : features) {
    const auto suffix = std::string(" namespaces");
    if (!f.present || f.name.size() <= suffix.size() || !f.name.ends_with(suffix)) continue;
    if (as_root && f.name == "user namespaces") continue;  // root boxes use host uids
    if (!namespaces.empty()) namespaces += ", ";
    namespaces += f.name.substr(0, f.name.size() - suffix.size());
  }
  out << "  namespaces: " << (namespaces.empty() ? "none" : namespaces) << '\n';

  const HostFeature* landlock = find(features, "landlock");
  out << "  "
      << (landlock && landlock->present ? "Landlock " + landlock->detail
                                        : std::string("no Landlock (box start refuses "
                                                      "without allow_without_landlock)"))
      << '\n';

  if (has(features, "seccomp"))
    out << "  seccomp allowlist v" << seccomp_filter::kPolicyVersion << ": "
        << seccomp_filter::allowed_syscalls().size() << " syscalls, "
        << seccomp_filter::argument_filtered_syscalls().size()
        << " more by argument (clone, ioctl, socket, socketpair, personality), the rest EPERM; "
        << seccomp_filter::embedded_program().size() << " BPF instructions\n";
  else
    out << "  no seccomp filter\n";

  const HostFeature* cgroups = find(features, "cgroups");
  if (cgroups && cgroups->present)
    out << "  cgroup " << cgroups->detail.substr(0, 2) << " memory/pids/cpu limits\n";
  else
    out << "  no cgroup limits (memory, pids, cpu are not enforced)\n";

  out << "  own uid: "
      << (as_root ? "a host uid per account from the configured range"
                  : "a user namespace mapping the box uid to yours")
      << '\n';
}

// The start steps (box/start_steps.hpp) and what two real starts did with them.
bool print_trials(bool as_root, std::ostream& out) {
  out << "\nbox start steps (required: the box does not start without it; optional: falls back):\n";
  for (const auto& s : start_steps())
    out << fmt::format("  {:<19} {:<9} {}\n", s.name, s.need == StepNeed::required ? "required" : "optional",
                       s.without);
  bool ok = true;
  out << "\ntrial box starts (each runs /bin/true):\n";
  for (const auto& t : trial_starts(as_root)) {
    if (!t.ok) {
      out << "  " << t.how << ": FAILED: " << t.error << '\n';
      ok = false;
      continue;
    }
    out << "  " << t.how << ": ok (clone " << to_string(t.plan.clone) << ", cgroup " << to_string(t.plan.cgroup)
        << ", /etc " << to_string(t.plan.etc) << ", mounts " << (t.plan.legacy_mounts ? "mount(2)" : "new API")
        << ")\n";
    for (const auto& f : t.fallbacks) out << "    fell back: " << f << '\n';
  }
  return ok;
}

// The first line `path --version` prints ("" if it does not run).
std::string version_of(const std::string& path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return "";
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) return "";
  if (pid == 0) {
    ::dup2(write_end.get(), STDOUT_FILENO);
    const char* argv[] = {path.c_str(), "--version", nullptr};
    ::execv(path.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  write_end.reset();
  std::string text;
  char buf[512];
  for (ssize_t n; text.size() < 4096 && (n = ::read(read_end.get(), buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  return text.substr(0, text.find('\n'));
}

void print_agent(const ServerConfig& config, std::ostream& out) {
  out << "\nagent (Claude Code in every box):\n";
  std::string why;
  std::optional<std::string> claude = find_claude(config.agent, &why);
  if (!claude) {
    out << "  none: " << why << '\n';
  } else if (std::string version = version_of(*claude); version.empty()) {
    out << "  none: " << *claude << " does not run (`" << *claude << " --version` failed)\n";
  } else {
    out << "  " << version << " from " << *claude << ", in boxes as " << kClaudeInBox << '\n';
  }
  try {
    std::optional<std::string> skills = find_skills_dir(config.agent);
    out << "  skills: " << (skills ? *skills + " (managed skills in every box)" : std::string("none configured"))
        << '\n';
  } catch (const Error& e) {
    out << "  skills: " << e.what() << " (the server refuses to start)\n";
  }
}

// One number from a /proc/sys file (the first of several), or nullopt.
std::optional<uint64_t> sysctl_number(const std::string& path, size_t index = 0) {
  std::optional<std::string> text = read_file_if_exists(path, 4096);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  uint64_t n = 0;
  for (size_t i = 0; i <= index; ++i)
    if (!(in >> n)) return std::nullopt;
  return n;
}

// What every box draws on and no cgroup of the whole box holds: the host's pty pool and its TCP
// memory. Each box's share is bounded ([box] ptys, tcp_memory); how many boxes at their bound
// would spend the pool is for the operator to weigh against max_active (informational).
void print_shared_pools(const ServerConfig& config, const std::string& cgroup_kind, std::ostream& out) {
  out << "\nshared kernel pools (what one box may take of each):\n";
  const auto pty_max = sysctl_number("/proc/sys/kernel/pty/max");
  const auto pty_reserve = sysctl_number("/proc/sys/kernel/pty/reserve");
  const uint64_t ptys = config.box.ptys, active = config.accounts.max_active;
  if (pty_max && pty_reserve && *pty_max > *pty_reserve) {
    const uint64_t pool = *pty_max - *pty_reserve;
    out << fmt::format("  ptys: {} for boxes (kernel.pty.max {} less {} reserved), at most {} per box ([box] ptys)",
                       pool, *pty_max, *pty_reserve, ptys);
    if (ptys * active > pool)
      out << fmt::format(": {} boxes at their limit take them all; with max_active {} raise kernel.pty.max to {}\n",
                         (pool + ptys - 1) / ptys, active, std::min<uint64_t>(*pty_reserve + ptys * active, 1 << 20));
    else
      out << fmt::format(": max_active {} boxes at their limit fit\n", active);
  }
  const auto pressure_pages = sysctl_number("/proc/sys/net/ipv4/tcp_mem", 1);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t per_box = cgroup_kind == "v1" ? config.box.tcp_memory_bytes : config.box.memory_bytes;
  const std::string bound = cgroup_kind == "v1" ? "[box] tcp_memory, cgroup v1" : "within [box] memory, cgroup v2";
  if (pressure_pages && per_box) {
    const uint64_t pressure = *pressure_pages * page;
    out << fmt::format(
        "  TCP socket memory: pressure at {} (net.ipv4.tcp_mem), at most {} per box ({}): {} boxes "
        "at their limit reach it\n",
        format_size(pressure), format_size(per_box), bound, (pressure + per_box - 1) / per_box);
  } else if (pressure_pages) {
    out << "  TCP socket memory: not bounded per box ([box] tcp_memory = \"0\")\n";
  }
}

// Which volume backend the server would use (volumes/volume_backend.hpp) and whether it can.
bool print_storage(const ServerConfig& config, std::ostream& out) {
  out << "\nstorage (every account's files in a volume of its own):\n";
  if (!config.storage.quotas()) {
    out << "  plain: directories of the state filesystem, no quota ([accounts] disk = \"0\")\n";
    return true;
  }
  const std::string quota = fmt::format("{} and {} inodes per account", format_size(config.storage.quota.disk_bytes),
                                        config.storage.quota.inodes);
  std::string why;
  if (!loop_images_supported(&why)) {
    out << "  loop_image: UNAVAILABLE (" << why << "): the server refuses to start with quotas on (" << quota
        << "); load the loop module and install e2fsprogs, or set [accounts] disk = \"0\"\n";
    return false;
  }
  out << "  loop_image: an ext4 image per account on a loop device, " << quota << " (kernel-enforced)\n"
      << "  project quotas: not used (agentbox needs no quota support in the kernel)\n";
  return true;
}

}  // namespace

int run_doctor(bool as_root, std::ostream& out, const std::optional<std::string>& config_path) {
  const std::vector<HostFeature> features = probe_host(as_root);
  out << "agentbox doctor (" << (as_root ? "as root" : "as an ordinary user") << ")\n\n";
  print_table(features, out);
  print_summary(features, as_root, out);

  bool ok = true;
  const bool required_present =
      std::none_of(features.begin(), features.end(), [](const HostFeature& f) { return f.required && !f.present; });
  // A trial needs what is required; without it the missing lines below say enough.
  if (required_present && !print_trials(as_root, out)) {
    out << "\nmissing: a working box start (see the trial above)\n";
    ok = false;
  }
  // The agent and storage sections describe the server this config would start.
  ServerConfig config;
  try {
    config = load_server_config(config_path);
    print_agent(config, out);
    if (!print_storage(config, out)) ok = false;
    const HostFeature* cgroups = find(features, "cgroups");
    print_shared_pools(config, cgroups && cgroups->present ? cgroups->detail.substr(0, 2) : "", out);
  } catch (const Error& e) {
    out << "\nthe server config has errors (agentbox config check): " << e.what() << '\n';
  }
  for (const auto& f : features) {
    if (f.required && !f.present) {
      if (ok) out << '\n';
      out << "missing: " << f.name << " — " << f.fix << '\n';
      ok = false;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace agentbox
