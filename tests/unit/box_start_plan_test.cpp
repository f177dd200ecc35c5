// The start plan (box/start_plan.hpp): every way a box can be started, as a table of what is
// offered and what the host can do against the clone path, cgroup timing, /etc source and mount
// API chosen. A change to the decision changes a row here.
#include "box/start_plan.hpp"

#include <gtest/gtest.h>
#include <linux/sched.h>
#include <sched.h>

namespace agentbox {
namespace {

enum Who { root, user };  // host_uid (daemon, root `agentbox run`) or user_ns (ordinary user)

struct Row {
  const char* what;
  Who who;
  bool cgroup;         // spec.use_cgroup
  bool bind_into_etc;  // spec has a bind under /etc
  StartOffer offer;
  HostCaps caps;
  ClonePath clone;
  CgroupTiming timing;
  EtcSource etc;
  bool legacy;
};

constexpr HostCaps v2{true, true, true};  // new mount API, clone into, parent builds /etc
constexpr HostCaps v1{true, false, true};
constexpr HostCaps old_kernel_v1{false, false, false};
constexpr HostCaps v2_user{true, true, false};  // as an ordinary user: no parent-built /etc
constexpr HostCaps v1_user{true, false, false};

using enum ClonePath;
using enum CgroupTiming;
using enum EtcSource;

// clang-format off  (a table: one row per line, as written)
const Row kRows[] = {
    // the daemon: host uids from a zygote
    {"daemon, cgroup v2", root, true, false, {true, true, false}, v2, zygote, clone_into, zygote_template, false},
    {"daemon, cgroup v1", root, true, false, {true, true, false}, v1, zygote, join_after_clone, zygote_template, false},
    {"daemon, bind into /etc", root, true, true, {true, true, false}, v2, zygote, clone_into, init_copy, false},
    {"daemon, forced mount(2)", root, true, false, {true, true, true}, v2, zygote, clone_into, init_copy, true},
    {"daemon, kernel before 5.12",
     root,
     true,
     false,
     {true, true, false},
     old_kernel_v1,
     zygote,
     join_after_clone,
     init_copy,
     true},
    {"daemon without a zygote, v2",
     root,
     true,
     false,
     {false, true, false},
     v2,
     vfork_exec,
     join_after_clone,
     parent_tree,
     false},
    {"daemon without a zygote, v1",
     root,
     true,
     false,
     {false, true, false},
     v1,
     vfork_exec,
     join_after_clone,
     parent_tree,
     false},
    // `agentbox run` as root: no zygote, a fresh network namespace, init a copy of the CLI
    {"run as root, init in place, v2",
     root,
     true,
     false,
     {false, false, false, true},
     v2,
     in_place,
     clone_into,
     parent_tree,
     false},
    {"run as root, init in place, v1",
     root,
     true,
     false,
     {false, false, false, true},
     v1,
     in_place,
     join_after_clone,
     parent_tree,
     false},
    {"run as root, init in place, old kernel",
     root,
     true,
     false,
     {false, false, false, true},
     old_kernel_v1,
     in_place,
     join_after_clone,
     init_copy,
     true},
    // `agentbox run` as an ordinary user, init a copy of the CLI
    {"run as a user, init in place",
     user,
     false,
     false,
     {false, false, false, true},
     v1_user,
     in_place,
     none,
     init_copy,
     false},
    {"run as a user, init in place, delegated v2",
     user,
     true,
     false,
     {false, false, false, true},
     v2_user,
     in_place,
     clone_into,
     init_copy,
     false},
    {"a zygote comes before in place",
     root,
     true,
     false,
     {true, true, false, true},
     v2,
     zygote,
     clone_into,
     zygote_template,
     false},
    // A starter that offers no copy of itself (BoxTest's exec ways; `agentbox run` before init in place)
    {"exec'd, as root, v2",
     root,
     true,
     false,
     {false, false, false},
     v2,
     vfork_exec,
     join_after_clone,
     parent_tree,
     false},
    {"exec'd, as root, v1",
     root,
     true,
     false,
     {false, false, false},
     v1,
     vfork_exec,
     join_after_clone,
     parent_tree,
     false},
    {"exec'd, as root, bind into /etc",
     root,
     true,
     true,
     {false, false, false},
     v1,
     vfork_exec,
     join_after_clone,
     init_copy,
     false},
    {"exec'd, as root, old kernel",
     root,
     true,
     false,
     {false, false, false},
     old_kernel_v1,
     vfork_exec,
     join_after_clone,
     init_copy,
     true},
    // ... as an ordinary user: a user namespace, cgroups only when delegated
    {"exec'd, as a user", user, false, false, {false, false, false}, v1_user, clone3_exec, none, init_copy, false},
    {"exec'd, as a user, delegated v2",
     user,
     true,
     false,
     {false, false, false},
     v2_user,
     clone3_exec,
     clone_into,
     init_copy,
     false},
    {"exec'd, as a user, delegated v1",
     user,
     true,
     false,
     {false, false, false},
     v1_user,
     clone3_exec,
     join_after_clone,
     init_copy,
     false},
    {"a user namespace is never the zygote's",
     user,
     true,
     false,
     {true, true, false},
     v2,
     clone3_exec,
     clone_into,
     init_copy,
     false},
};
// clang-format on

BoxSpec spec_for(const Row& r) {
  BoxSpec s;
  s.identity = r.who == root ? IdentityMode::host_uid : IdentityMode::user_ns;
  s.use_cgroup = r.cgroup;
  if (r.bind_into_etc) s.binds.push_back({"/srv/certs", "/etc/ssl/private", false});
  return s;
}

TEST(StartPlan, TheDecisionTable) {
  for (const Row& r : kRows) {
    SCOPED_TRACE(r.what);
    const StartPlan p = plan_start(spec_for(r), r.offer, r.caps);
    EXPECT_EQ(to_string(p.clone), to_string(r.clone));
    EXPECT_EQ(to_string(p.cgroup), to_string(r.timing));
    EXPECT_EQ(to_string(p.etc), to_string(r.etc));
    EXPECT_EQ(p.legacy_mounts, r.legacy);
  }
}

TEST(StartPlan, CloneFlagsFollowThePlan) {
  for (const Row& r : kRows) {
    SCOPED_TRACE(r.what);
    const StartPlan p = plan_start(spec_for(r), r.offer, r.caps);
    for (uint64_t ns : {CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWIPC, CLONE_NEWUTS}) EXPECT_TRUE(p.clone_flags & ns);
    EXPECT_TRUE(p.clone_flags & CLONE_PIDFD);
    EXPECT_EQ(bool(p.clone_flags & CLONE_NEWNET), !r.offer.netns) << "a persistent netns is joined, not made";
    EXPECT_EQ(bool(p.clone_flags & CLONE_NEWUSER), r.who == user);
    EXPECT_EQ(bool(p.clone_flags & CLONE_INTO_CGROUP), r.timing == clone_into);
    EXPECT_FALSE(p.clone_flags & CLONE_NEWCGROUP) << "made by init once it is in its group";
  }
}

// Nothing but the spec, the offer and the host decides: the same inputs, the same plan.
TEST(StartPlan, IsAPureFunction) {
  const Row& r = kRows[0];
  EXPECT_EQ(plan_start(spec_for(r), r.offer, r.caps), plan_start(spec_for(r), r.offer, r.caps));
}

}  // namespace
}  // namespace agentbox
