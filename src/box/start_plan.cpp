#include "box/start_plan.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>

namespace agentbox {
namespace {

// The namespaces every box gets; network and user are added per start.
constexpr uint64_t kBoxNamespaces = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;

// A box with a bind into /etc needs a mount point made there: only init's own copy has one.
bool binds_into_etc(const BoxSpec& spec) {
  return std::any_of(spec.binds.begin(), spec.binds.end(),
                     [](const BindMount& b) { return b.target == "/etc" || b.target.starts_with("/etc/"); });
}

}  // namespace

HostCaps HostCaps::probe(bool cgroup_clone_into) {
  HostCaps caps;
  // mount_setattr with an invalid fd tells ENOSYS (too old) from EBADF (there).
  mount_attr attr{};
  caps.new_mount_api = ::mount_setattr(-1, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0 || errno != ENOSYS;
  caps.cgroup_clone_into = cgroup_clone_into;
  caps.parent_builds_etc = caps.new_mount_api && ::geteuid() == 0;
  return caps;
}

StartPlan plan_start(const BoxSpec& spec, const StartOffer& offer, const HostCaps& caps) {
  const bool user_ns = spec.identity == IdentityMode::user_ns;
  StartPlan p;
  // A user-namespace box needs its parent to write its id maps: never the zygote's child.
  const bool zygote = offer.zygote && !user_ns;

  if (!spec.use_cgroup) {
    p.cgroup = CgroupTiming::none;
  } else if (caps.cgroup_clone_into && (zygote || user_ns || offer.in_place)) {
    p.cgroup = CgroupTiming::clone_into;  // those clones copy anyway: born in the group for free
  } else {
    // v1 has no clone-into; a vfork-style clone (no zygote, no copy) joins after as well.
    p.cgroup = CgroupTiming::join_after_clone;
  }

  if (zygote) {
    p.clone = ClonePath::zygote;
  } else if (offer.in_place) {
    // No exec: a static binary's start (glibc's CPU probes, page faults) costs a one-shot box
    // more than copying the caller's few pages.
    p.clone = ClonePath::in_place;
  } else if (user_ns || p.cgroup == CgroupTiming::clone_into) {
    p.clone = ClonePath::clone3_exec;
  } else {
    p.clone = ClonePath::vfork_exec;
  }

  p.legacy_mounts = offer.force_legacy_mounts || !caps.new_mount_api;
  if (p.legacy_mounts || binds_into_etc(spec)) {
    p.etc = EtcSource::init_copy;
  } else if (zygote) {
    p.etc = EtcSource::zygote_template;
  } else if (!user_ns && caps.parent_builds_etc) {
    p.etc = EtcSource::parent_tree;
  } else {
    p.etc = EtcSource::init_copy;
  }

  p.clone_flags = kBoxNamespaces | CLONE_PIDFD;
  if (!offer.netns) p.clone_flags |= CLONE_NEWNET;
  if (user_ns) p.clone_flags |= CLONE_NEWUSER;
  if (p.cgroup == CgroupTiming::clone_into) p.clone_flags |= CLONE_INTO_CGROUP;
  return p;
}

std::string_view to_string(ClonePath p) {
  switch (p) {
    case ClonePath::zygote: return "zygote";
    case ClonePath::vfork_exec: return "vfork+exec";
    case ClonePath::clone3_exec: return "clone3+exec";
    case ClonePath::in_place: return "clone3, init in place";
  }
  return "?";
}

std::string_view to_string(CgroupTiming t) {
  switch (t) {
    case CgroupTiming::none: return "none";
    case CgroupTiming::clone_into: return "clone into";
    case CgroupTiming::join_after_clone: return "join after clone";
  }
  return "?";
}

std::string_view to_string(EtcSource s) {
  switch (s) {
    case EtcSource::zygote_template: return "zygote template";
    case EtcSource::parent_tree: return "parent tree";
    case EtcSource::init_copy: return "init copy";
  }
  return "?";
}

}  // namespace agentbox
