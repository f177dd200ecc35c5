#include "box/contain/identity.hpp"

#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/file_io.hpp"

namespace agentbox::identity {
namespace {

int last_cap() {
  try {
    return std::stoi(read_file("/proc/sys/kernel/cap_last_cap"));
  } catch (...) {
    return CAP_LAST_CAP;
  }
}

void write_id_maps(const std::string& proc_dir, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid,
                   gid_t outside_gid) {
  write_file(proc_dir + "/uid_map", fmt::format("{} {} 1\n", inside_uid, outside_uid));
  write_file(proc_dir + "/setgroups", "deny");
  write_file(proc_dir + "/gid_map", fmt::format("{} {} 1\n", inside_gid, outside_gid));
}

void clear_capability_sets() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  check(::syscall(SYS_capset, &hdr, data), "capset(0)");
}

}  // namespace

void apply_from_parent(const BoxSpec& spec, pid_t init_pid) {
  if (spec.identity != IdentityMode::user_ns) return;
  write_id_maps(fmt::format("/proc/{}", init_pid), 0, spec.outer_uid, 0, spec.outer_gid);
}

void apply_in_child(const BoxSpec& spec) {
  if (spec.identity == IdentityMode::user_ns) {
    // The outer namespace made us root (= the caller) to build mounts; the box user lives in a
    // nested namespace where only spec.uid exists, mapped onto that root. The mount namespace
    // stays owned by the outer one, so nothing here can change mounts again.
    check(::unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)");
    write_id_maps("/proc/self", spec.uid, 0, spec.gid, 0);
  }

  // The bounding set can only be dropped while we still hold CAP_SETPCAP, i.e. before setuid.
  const int last = last_cap();
  for (int cap = 0; cap <= last; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      throw sys_error(fmt::format("prctl(PR_CAPBSET_DROP, {})", cap));
  }
  check(::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)");

  if (spec.identity == IdentityMode::host_uid)
    check(::setgroups(0, nullptr), "setgroups(0)");  // user_ns: denied by design, nothing to drop
  check(::setresgid(spec.gid, spec.gid, spec.gid), fmt::format("setresgid({})", spec.gid));
  check(::setresuid(spec.uid, spec.uid, spec.uid), fmt::format("setresuid({})", spec.uid));
  clear_capability_sets();
  if (!holds_no_capabilities()) throw Error("identity: capabilities remain after the drop");
}

bool holds_no_capabilities() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &hdr, data) != 0) return false;
  for (const auto& d : data)
    if (d.effective || d.permitted || d.inheritable) return false;
  const int last = last_cap();
  for (int cap = 0; cap <= last; ++cap)
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1) return false;
  return true;
}

}  // namespace agentbox::identity
