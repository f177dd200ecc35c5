#include "box/cgroup_orphans.hpp"

#include <mntent.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <memory>

#include "box/cgroup_fs.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

namespace fs = std::filesystem;
using namespace cgroupfs;

constexpr std::string_view kGroupPrefix = "box-";
constexpr std::string_view kDeleted = " (deleted)";  // readlink of an exe replaced since it started

// The name of the executable behind /proc/PID/exe ("" when there is none: gone, a zombie, a
// kernel thread).
std::string exe_name(const std::string& link) {
  std::error_code ec;
  std::string target = fs::read_symlink(link, ec).string();
  if (ec) return {};
  if (target.ends_with(kDeleted)) target.resize(target.size() - kDeleted.size());
  return fs::path(target).filename().string();
}

// Kills what runs in one group directory (and its subgroups, deepest first) and removes it.
void remove_group(const std::string& dir, OrphanSweep& sweep) {
  std::error_code ec;
  for (const fs::directory_entry& child : fs::directory_iterator(dir, ec))
    if (child.is_directory(ec) && !child.is_symlink(ec)) remove_group(child.path().string(), sweep);
  const std::string kill_file = dir + "/cgroup.kill";
  const std::vector<std::string> procs = {dir + "/cgroup.procs", dir + "/tasks"};
  if (exists(kill_file)) {
    try {
      write_knob(kill_file, "1");  // every task, those forked meanwhile included
    } catch (const Error&) {
      sweep.tasks_killed += kill_listed(procs);
    }
  } else {
    // v1 has no cgroup.kill: sweep, and sweep again while rmdir finds tasks (a fork between
    // the read and the kill); the group's pids.max bounds how often.
    sweep.tasks_killed += kill_listed(procs);
  }
  try {
    remove_group_dir(dir, [&] { sweep.tasks_killed += kill_listed(procs); });
    ++sweep.groups;
  } catch (const Error& e) {
    sweep.failed.push_back(e.what());
  }
}

}  // namespace

std::vector<std::string> agentbox_group_parents(const std::string& root) {
  std::vector<std::string> parents;
  std::unique_ptr<FILE, int (*)(FILE*)> table(::setmntent("/proc/self/mounts", "re"), ::endmntent);
  if (!table) return parents;
  mntent ent{};
  char buf[4096];
  while (::getmntent_r(table.get(), &ent, buf, sizeof buf)) {
    const std::string_view type(ent.mnt_type);
    if (type != "cgroup" && type != "cgroup2") continue;
    const std::string dir(ent.mnt_dir);
    if (dir != root && !dir.starts_with(root + "/")) continue;
    const std::string parent = dir + "/agentbox";
    if (exists(parent) && std::find(parents.begin(), parents.end(), parent) == parents.end()) parents.push_back(parent);
  }
  return parents;
}

std::optional<pid_t> group_owner(std::string_view name) {
  if (!name.starts_with(kGroupPrefix)) return std::nullopt;
  name.remove_prefix(kGroupPrefix.size());
  const size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  pid_t pid = 0;
  const auto [end, err] = std::from_chars(name.data(), name.data() + dash, pid);
  if (err != std::errc() || end != name.data() + dash || pid <= 0) return std::nullopt;
  return pid;
}

bool is_live_agentbox(pid_t pid) {
  const std::string name = exe_name("/proc/" + std::to_string(pid) + "/exe");
  if (name.empty()) return false;
  const std::string self = exe_name("/proc/self/exe");
  return name == self || name == "agentbox";
}

OrphanSweep reap_orphan_groups(const std::vector<std::string>& parents, const std::function<bool(pid_t)>& owner_alive) {
  OrphanSweep sweep;
  const pid_t self = ::getpid();
  for (const std::string& parent : parents) {
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator(parent, ec)) {
      if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
      const std::optional<pid_t> owner = group_owner(entry.path().filename().string());
      if (!owner || (*owner != self && owner_alive(*owner))) continue;
      remove_group(entry.path().string(), sweep);
    }
  }
  return sweep;
}

}  // namespace agentbox
