// cgroup v1 driver: one directory <mount>/agentbox/<name> per controller hierarchy. cpu and
// cpuacct are separate mounts on some hosts (ours) and one "cpu,cpuacct" mount on others.
#include <fcntl.h>
#include <mntent.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "box/cgroup_drivers.hpp"
#include "box/cgroup_fs.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

using namespace cgroupfs;

// Where each controller's hierarchy is mounted (cpuacct may be absent: usage only).
struct V1Mounts {
  std::string memory, pids, cpu, cpuacct;

  std::string* slot(std::string_view controller) {
    if (controller == "memory") return &memory;
    if (controller == "pids") return &pids;
    if (controller == "cpu") return &cpu;
    if (controller == "cpuacct") return &cpuacct;
    return nullptr;
  }
  // Distinct mount directories (a "cpu,cpuacct" mount appears once).
  std::vector<std::string> distinct() const {
    std::vector<std::string> out;
    for (const std::string* m : {&memory, &pids, &cpu, &cpuacct}) {
      if (!m->empty() && std::find(out.begin(), out.end(), *m) == out.end()) out.push_back(*m);
    }
    return out;
  }
};

constexpr const char* kV1Controllers[] = {"memory", "pids", "cpu", "cpuacct"};

// v1 hierarchies mounted under root, as the kernel lists them.
V1Mounts mounts_from_table(const std::string& root) {
  V1Mounts found;
  std::unique_ptr<FILE, int (*)(FILE*)> table(::setmntent("/proc/self/mounts", "re"), ::endmntent);
  if (!table) return found;
  mntent ent{};
  char buf[4096];
  while (::getmntent_r(table.get(), &ent, buf, sizeof buf)) {
    if (std::string_view(ent.mnt_type) != "cgroup") continue;
    if (std::string_view(ent.mnt_dir).rfind(root + "/", 0) != 0) continue;
    for (const char* c : kV1Controllers) {
      std::string* slot = found.slot(c);
      if (slot->empty() && ::hasmntopt(&ent, c)) *slot = ent.mnt_dir;
    }
  }
  return found;
}

// The conventional layout root/<controller> (possibly symlinks to "cpu,cpuacct"); used when
// no v1 mount lies under root, which is the case for the unit tests' fake trees.
V1Mounts mounts_from_layout(const std::string& root) {
  V1Mounts found;
  for (const char* c : kV1Controllers) {
    std::error_code ec;
    const auto dir = std::filesystem::canonical(root + "/" + c, ec);
    if (!ec && std::filesystem::is_directory(dir, ec)) *found.slot(c) = dir.string();
  }
  return found;
}

// memsw (memory+swap) exists only with swap accounting; some kernels refuse it (EINVAL,
// EOPNOTSUPP) even then, and the memory limit alone still holds.
void write_memsw(const std::string& file, const std::string& value) {
  try {
    write_knob(file, value);
  } catch (const Error& e) {
    if (e.code() != EINVAL && e.code() != EOPNOTSUPP) throw;
  }
}

void write_memory_limit(const std::string& dir, uint64_t bytes) {
  const std::string memsw = dir + "/memory.memsw.limit_in_bytes";
  const bool has_memsw = exists(memsw);
  // The kernel keeps limit <= memsw: lift memsw first so any new limit is accepted.
  if (has_memsw) write_memsw(memsw, "-1");
  write_knob(dir + "/memory.limit_in_bytes", bytes ? std::to_string(bytes) : "-1");
  if (!bytes) return;
  if (has_memsw) {
    write_memsw(memsw, std::to_string(bytes));  // no swap beyond the limit
  } else if (exists(dir + "/memory.swappiness")) {
    // Without swap accounting, swapped-out pages escape the limit; swappiness 0 keeps the
    // group's reclaim from swapping anonymous memory. Best effort: the limit stands anyway.
    try {
      write_knob(dir + "/memory.swappiness", "0");
    } catch (const Error&) {
    }
  }
}

// v1 charges the socket buffers of a group's TCP connections to the group (and bounds them) only
// once this knob is written: until then they come out of the host's tcp_mem alone, where one box
// could push every TCP socket on the host into memory pressure. v2 charges them to memory.max.
// Kernels without kmem accounting have no such file: nothing to charge them to.
void write_tcp_memory_limit(const std::string& dir, uint64_t bytes) {
  const std::string knob = dir + "/memory.kmem.tcp.limit_in_bytes";
  if (exists(knob)) write_knob(knob, bytes ? std::to_string(bytes) : "-1");
}

// A group the kernel just made holds its defaults (no memory limit, pids.max "max", a 100 ms
// period without quota): only the limits asked for are written to it. Not an optimisation of
// taste: each write to cpu.cfs_period_us or cpu.cfs_quota_us walks every cpu cgroup on the host
// (the kernel's bandwidth check), so two needless writes made box starts grow with box count.
// A group taken over from a crash gets every value rewritten.
// Hierarchies the group was not made in (CgroupUse::limits_only) are skipped.
void write_limits(const V1Mounts& group, const Limits& limits, bool fresh) {
  if (!group.memory.empty() && (!fresh || limits.memory_bytes)) {
    write_memory_limit(group.memory, limits.memory_bytes);
  }
  if (!group.memory.empty() && (!fresh || limits.tcp_memory_bytes)) {
    write_tcp_memory_limit(group.memory, limits.tcp_memory_bytes);
  }
  if (!fresh || limits.pids) {
    write_knob(group.pids + "/pids.max", limits.pids ? std::to_string(limits.pids) : "max");
  }
  if (group.cpu.empty()) return;
  if (!fresh) write_knob(group.cpu + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUsec));
  const uint64_t quota = cpu_quota_usec(limits.cpu_millicores);
  if (!fresh || quota) write_knob(group.cpu + "/cpu.cfs_quota_us", quota ? std::to_string(quota) : "-1");
}

class CgroupV1 final : public Cgroup {
 public:
  explicit CgroupV1(V1Mounts dirs) : dirs_(std::move(dirs)), distinct_(dirs_.distinct()) {}

  void attach(pid_t pid) override {
    for (const auto& dir : distinct_) write_knob(procs_file(dir), std::to_string(pid));
  }

  std::vector<UniqueFd> open_self_join() const override {
    std::vector<UniqueFd> fds;
    for (const auto& dir : distinct_) {
      const std::string tasks = dir + "/tasks";
      fds.emplace_back(static_cast<int>(check(::open(tasks.c_str(), O_WRONLY | O_CLOEXEC), "open(" + tasks + ")")));
    }
    return fds;
  }

  CgroupUsage usage() const override {
    CgroupUsage u;
    if (!dirs_.memory.empty()) {
      u.memory_bytes = read_u64(dirs_.memory + "/memory.usage_in_bytes");
      u.memory_peak_bytes = read_u64_or_zero(dirs_.memory + "/memory.max_usage_in_bytes");
      u.oom_kills = read_keyed_u64(dirs_.memory + "/memory.oom_control", "oom_kill");
    }
    u.pids = read_u64(dirs_.pids + "/pids.current");
    if (!dirs_.cpuacct.empty()) u.cpu_usec = read_u64(dirs_.cpuacct + "/cpuacct.usage") / 1000;
    return u;
  }

  void destroy() override {
    std::vector<std::string> procs;
    for (const auto& dir : distinct_) {
      if (exists(dir)) procs.push_back(procs_file(dir));
    }
    if (procs.empty()) return;
    // No cgroup.kill in v1: sweep, and sweep again while rmdir says tasks remain (a task
    // may have forked between reading the list and the kill).
    kill_listed(procs);
    for (const auto& dir : distinct_) remove_group_dir(dir, [&] { kill_listed(procs); });
  }

  std::string path() const override { return dirs_.memory.empty() ? dirs_.pids : dirs_.memory; }

 private:
  static std::string procs_file(const std::string& dir) {
    const std::string procs = dir + "/cgroup.procs";
    return exists(procs) ? procs : dir + "/tasks";
  }

  V1Mounts dirs_;  // the group's directory in each controller's hierarchy
  std::vector<std::string> distinct_;
};

class CgroupV1Driver final : public CgroupDriver {
 public:
  explicit CgroupV1Driver(V1Mounts mounts) : mounts_(std::move(mounts)) {}

  std::string kind() const override { return "v1"; }

  std::unique_ptr<Cgroup> create(const std::string& name, const Limits& limits, CgroupUse use) override {
    check_group_name(name);
    V1Mounts group;
    for (const char* c : kV1Controllers) {
      const std::string& mount = *mounts_.slot(c);
      if (!mount.empty()) *group.slot(c) = mount + "/agentbox/" + name;
    }
    if (use == CgroupUse::limits_only) {
      if (!limits.memory_bytes && !limits.tcp_memory_bytes) group.memory.clear();
      if (!limits.cpu_millicores) group.cpu.clear();
      group.cpuacct.clear();  // still joined through cpu where one mount holds both
    }
    auto cgroup = std::make_unique<CgroupV1>(group);
    try {
      bool fresh = true;
      for (const auto& dir : group.distinct()) {
        make_dir(std::filesystem::path(dir).parent_path());
        fresh = make_dir(dir) && fresh;
      }
      write_limits(group, limits, fresh);
    } catch (const Error& e) {
      try {
        cgroup->destroy();  // no half-configured group left behind
      } catch (const Error&) {
      }
      throw e.wrap("create cgroup v1 group " + name);
    }
    return cgroup;
  }

 private:
  V1Mounts mounts_;
};

}  // namespace

std::unique_ptr<CgroupDriver> make_cgroup_v1_driver(const std::string& root, std::string* found, std::string* why_not) {
  V1Mounts mounts = mounts_from_table(root);
  if (mounts.distinct().empty()) mounts = mounts_from_layout(root);
  std::string missing;
  for (const char* c : kRequiredControllers) {
    if (mounts.slot(c)->empty()) missing += missing.empty() ? c : std::string(", ") + c;
  }
  if (!missing.empty()) {
    if (why_not) *why_not = "no v1 hierarchy under " + root + " for " + missing;
    return nullptr;
  }
  try {
    for (const auto& mount : mounts.distinct()) {
      make_dir(mount + "/agentbox");
      check_writable(mount + "/agentbox");
    }
  } catch (const Error& e) {
    if (why_not) *why_not = e.what();
    return nullptr;
  }
  if (found) {
    *found = "v1: memory at " + mounts.memory + ", pids at " + mounts.pids + ", cpu at " + mounts.cpu;
    if (!mounts.cpuacct.empty()) *found += ", cpuacct at " + mounts.cpuacct;
  }
  return std::make_unique<CgroupV1Driver>(std::move(mounts));
}

}  // namespace agentbox
