#include "box/contain/contain.hpp"

#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "box/contain/identity.hpp"
#include "box/contain/landlock.hpp"
#include "box/contain/netns.hpp"
#include "box/contain/rlimits.hpp"
#include "box/contain/seccomp.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

// Each step's failure names the step.
template <class F>
auto step(const char* name, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw e.wrap(name);
  }
}

}  // namespace

ContainResult contain(const BoxSpec& spec, int netns_fd, mounts::Api mount_api,
                      const std::function<void()>& await_cgroup, mounts::EtcSource etc) {
  ContainResult r;
  step("network", [&] { netns::apply_in_child(netns_fd); });
  step("mounts", [&] { mounts::apply_in_child(spec, mount_api, etc); });
  // The box's cgroup: a namespace made once we are in it has that group as its root. Nothing
  // of the box's own runs before ready, so init may build the mounts while the daemon attaches.
  step("cgroup", await_cgroup);
  step("cgroup namespace", [] { check(::unshare(CLONE_NEWCGROUP), "unshare(CLONE_NEWCGROUP)"); });
  step("hostname", [&] {
    check(::sethostname(spec.hostname.data(), spec.hostname.size()), "sethostname");
  });
  step("rlimits", [&] { rlimits::apply_in_child(spec); });
  step("identity", [&] { identity::apply_in_child(spec); });
  // Changing uid already made us non-dumpable; say it explicitly: no ptrace or /proc/1/mem
  // access to init from the box's own processes.
  step("dumpable", [] { check(::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)"); });
  step("no_new_privs", [] { check(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)"); });
  r.landlock_abi = step("landlock", [&] { return landlock::apply_in_child(spec); });
  // Last: once the filter is on, the steps above (mount, unshare, ...) would be refused.
  step("seccomp", [] { seccomp_filter::apply_in_child(); });
  return r;
}

}  // namespace agentbox
