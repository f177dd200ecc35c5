#include "box/contain/contain.hpp"

#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "box/contain/identity.hpp"
#include "box/contain/landlock.hpp"
#include "box/contain/netns.hpp"
#include "box/contain/rlimits.hpp"
#include "box/contain/seccomp.hpp"
#include "box/start_steps.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

// Each step's failure names the step (every one here is required: box/start_steps.hpp).
template <class F>
auto step(StartStep s, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw e.wrap(step_info(s).name);
  }
}

}  // namespace

ContainResult contain(const BoxSpec& spec, int netns_fd, bool legacy_mounts, const mounts::EtcFrom& etc,
                      const std::function<void()>& await_cgroup) {
  ContainResult r;
  step(StartStep::network, [&] { netns::apply_in_child(netns_fd); });
  step(StartStep::mounts, [&] { mounts::apply_in_child(spec, legacy_mounts, etc); });
  // The box's cgroup: a namespace made once we are in it has that group as its root. Nothing
  // of the box's own runs before ready, so init may build the mounts while the daemon attaches.
  step(StartStep::cgroup, await_cgroup);
  step(StartStep::cgroup_namespace, [] { check(::unshare(CLONE_NEWCGROUP), "unshare(CLONE_NEWCGROUP)"); });
  step(StartStep::hostname, [&] { check(::sethostname(spec.hostname.data(), spec.hostname.size()), "sethostname"); });
  step(StartStep::rlimits, [&] { rlimits::apply_in_child(spec); });
  step(StartStep::identity, [&] { identity::apply_in_child(spec); });
  // Changing uid already made us non-dumpable; say it explicitly: no ptrace or /proc/1/mem
  // access to init from the box's own processes.
  step(StartStep::dumpable, [] { check(::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)"); });
  step(StartStep::no_new_privs, [] { check(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)"); });
  r.landlock_abi = step(StartStep::landlock, [&] { return landlock::apply_in_child(spec); });
  // Last: once the filter is on, the steps above (mount, unshare, ...) would be refused.
  step(StartStep::seccomp, [] { seccomp_filter::apply_in_child(); });
  return r;
}

}  // namespace agentbox
