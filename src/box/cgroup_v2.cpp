// cgroup v2 driver: one directory <root>/agentbox/<name> holding every controller.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "box/cgroup_drivers.hpp"
#include "box/cgroup_fs.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

using namespace cgroupfs;

// Controller names in a cgroup.controllers / cgroup.subtree_control text ("+x" counts as x,
// which is what a fake tree holds after we wrote it).
std::set<std::string> controller_words(const std::string& text) {
  std::set<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.insert(w[0] == '+' ? w.substr(1) : w);
  return words;
}

std::string missing_controllers(const std::string& file) {
  const auto have = controller_words(read_file(file, 4096));
  std::string missing;
  for (const char* c : kRequiredControllers) {
    if (!have.count(c)) missing += missing.empty() ? c : std::string(", ") + c;
  }
  return missing;
}

// Children of dir get memory, pids and cpu (the parent must delegate them level by level).
void enable_for_children(const std::string& dir) {
  const std::string subtree = dir + "/cgroup.subtree_control";
  if (!missing_controllers(subtree).empty()) write_knob(subtree, "+memory +pids +cpu");
}

// Where the daemon's own processes go when its cgroup namespace's root holds them.
constexpr const char* kDaemonLeaf = "daemon";

// A cgroup that holds processes cannot delegate controllers (the no-internal-process rule:
// EBUSY), except the real root. In a cgroup namespace (a container) the root that the daemon
// sees is some group of the host's, holding the daemon itself: move whatever it holds into the
// leaf <root>/daemon first. Only a non-root group has cgroup.type, so the host's root, with
// every host process in it, is never emptied.
void move_processes_to_leaf(const std::string& root) {
  if (!exists(root + "/cgroup.type")) return;
  const std::vector<pid_t> pids = read_pids(root + "/cgroup.procs");
  if (pids.empty()) return;
  const std::string leaf = root + "/" + kDaemonLeaf;
  make_dir(leaf);
  const std::string procs = leaf + "/cgroup.procs";
  // One pid per write(2), as the kernel takes them; O_APPEND keeps a fake tree's list whole.
  UniqueFd fd(::open(procs.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  if (!fd) throw sys_error("open(" + procs + ")");
  for (pid_t pid : pids) {
    const std::string line = std::to_string(pid) + "\n";
    ssize_t n;
    do {
      n = ::write(fd.get(), line.data(), line.size());
    } while (n < 0 && errno == EINTR);
    // ESRCH: it exited meanwhile. Anything else (a kernel thread: EINVAL) leaves the root busy.
    if (n < 0 && errno != ESRCH) throw sys_error("write(" + procs + ", \"" + std::to_string(pid) + "\")");
  }
}

// A group the kernel just made holds its defaults ("max" everywhere, a 100 ms period): only the
// limits asked for are written to it, as in v1 (a cpu.max write walks every cpu cgroup on the
// host). A group taken over from a crash gets every value rewritten. No tcp_memory_bytes here:
// v2 charges the group's socket buffers to memory.max and has no separate knob for them.
void write_limits(const std::string& dir, const Limits& limits, bool fresh) {
  const bool mem = limits.memory_bytes != 0;
  if (!fresh || mem) {
    write_knob(dir + "/memory.max", mem ? std::to_string(limits.memory_bytes) : "max");
    // No swap beyond the memory limit; kernels without swap accounting have no such file.
    if (exists(dir + "/memory.swap.max")) write_knob(dir + "/memory.swap.max", mem ? "0" : "max");
  }
  if (!fresh || limits.pids) write_knob(dir + "/pids.max", limits.pids ? std::to_string(limits.pids) : "max");
  const uint64_t quota = cpu_quota_usec(limits.cpu_millicores);
  if (!fresh || quota) {
    write_knob(dir + "/cpu.max",
               (quota ? std::to_string(quota) : std::string("max")) + " " + std::to_string(kCpuPeriodUsec));
  }
}

class CgroupV2 final : public Cgroup {
 public:
  explicit CgroupV2(std::string dir) : dir_(std::move(dir)) {}

  void open_dir() {
    dirfd_.reset(::open(dir_.c_str(), O_DIRECTORY | O_CLOEXEC));
    if (!dirfd_) throw sys_error("open(" + dir_ + ")");
  }

  void attach(pid_t pid) override { write_knob(dir_ + "/cgroup.procs", std::to_string(pid)); }

  int clone_into_fd() const override { return dirfd_.get(); }

  CgroupUsage usage() const override {
    CgroupUsage u;
    u.memory_bytes = read_u64(dir_ + "/memory.current");
    u.memory_peak_bytes = read_u64_or_zero(dir_ + "/memory.peak");  // kernel >= 5.19
    u.pids = read_u64(dir_ + "/pids.current");
    u.cpu_usec = read_keyed_u64(dir_ + "/cpu.stat", "usage_usec");
    u.oom_kills = read_keyed_u64(dir_ + "/memory.events", "oom_kill");
    return u;
  }

  void destroy() override {
    dirfd_.reset();
    if (!exists(dir_)) return;
    const std::string kill_file = dir_ + "/cgroup.kill";
    const std::vector<std::string> procs = {dir_ + "/cgroup.procs"};
    if (exists(kill_file)) {
      // The kernel kills every task, including ones forked meanwhile (kernel >= 5.14).
      write_knob(kill_file, "1");
      remove_group_dir(dir_, nullptr);
    } else {
      kill_listed(procs);
      remove_group_dir(dir_, [&] { kill_listed(procs); });
    }
  }

  std::string path() const override { return dir_; }

 private:
  std::string dir_;
  UniqueFd dirfd_;  // for clone3(CLONE_INTO_CGROUP)
};

class CgroupV2Driver final : public CgroupDriver {
 public:
  explicit CgroupV2Driver(std::string parent) : parent_(std::move(parent)) {}

  std::string kind() const override { return "v2"; }
  bool clones_into() const override { return true; }

  // One directory holds every controller: `use` changes nothing here.
  std::unique_ptr<Cgroup> create(const std::string& name, const Limits& limits, CgroupUse) override {
    check_group_name(name);
    const std::string dir = parent_ + "/" + name;
    auto group = std::make_unique<CgroupV2>(dir);
    try {
      write_limits(dir, limits, make_dir(dir));
      group->open_dir();
    } catch (const Error& e) {
      try {
        group->destroy();  // no half-configured group left behind
      } catch (const Error&) {
      }
      throw e.wrap("create cgroup " + dir);
    }
    return group;
  }

 private:
  std::string parent_;  // <v2 root>/agentbox
};

}  // namespace

std::unique_ptr<CgroupDriver> make_cgroup_v2_driver(const std::string& root, std::string* found, std::string* why_not) {
  std::string reasons;
  // Pure v2 hosts mount it at root; hybrid hosts (systemd) at root/unified.
  for (const std::string& v2root : {root, root + "/unified"}) {
    const std::string controllers = v2root + "/cgroup.controllers";
    if (!exists(controllers)) continue;
    try {
      if (const std::string missing = missing_controllers(controllers); !missing.empty()) {
        reasons += (reasons.empty() ? "" : "; ") + controllers + " lacks " + missing;
        continue;
      }
      if (!missing_controllers(v2root + "/cgroup.subtree_control").empty()) move_processes_to_leaf(v2root);
      enable_for_children(v2root);
      make_dir(v2root + "/agentbox");
      check_writable(v2root + "/agentbox");
      enable_for_children(v2root + "/agentbox");
    } catch (const Error& e) {
      reasons += (reasons.empty() ? "" : "; ") + std::string(e.what());
      continue;
    }
    if (found) *found = "v2 at " + v2root + "/agentbox";
    return std::make_unique<CgroupV2Driver>(v2root + "/agentbox");
  }
  if (why_not) *why_not = reasons.empty() ? "no cgroup2 hierarchy at " + root + " or " + root + "/unified" : reasons;
  return nullptr;
}

}  // namespace agentbox
