// The sweep of a SIGKILLed daemon's cgroups (box/cgroup_orphans.hpp) on a fake cgroup tree: the
// groups of owners that are gone go, a live daemon's stay (the control), names that are not a
// box group's are left alone. tests/e2e/test_orphan_cgroups.py does the same on the real
// hierarchies after a real SIGKILL.
#include "box/cgroup_orphans.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

namespace fs = std::filesystem;

TEST(CgroupOrphans, TheOwnerIsThePidInABoxGroupsName) {
  EXPECT_EQ(group_owner("box-1234-7"), 1234);
  EXPECT_EQ(group_owner("box-1-1"), 1);
  for (const char* name : {"box-", "box--1", "box-x-1", "box-12", "box-0-1", "daemon", "boxes-1-1", "box-12x-1"})
    EXPECT_EQ(group_owner(name), std::nullopt) << name;
}

TEST(CgroupOrphans, ALiveAgentboxIsOneRunningTheSweepersExecutable) {
  EXPECT_TRUE(is_live_agentbox(::getpid())) << "the same executable as the sweeper";
  EXPECT_FALSE(is_live_agentbox(0x3fffffff)) << "a pid that is gone";
}

TEST(CgroupOrphans, GroupsOfGoneOwnersAreRemovedAndALiveDaemonsStay) {
  testing::ScratchDir scratch("agentbox-orphans");
  std::vector<std::string> parents;
  for (const char* hierarchy : {"memory", "pids"}) {
    const std::string parent = scratch.path() + "/" + hierarchy + "/agentbox";
    const std::vector<std::string> groups = {"box-111-1", "box-111-2",
                                             "box-222-1", "box-" + std::to_string(::getpid()) + "-3",
                                             "not-a-box", "box-111-1/inner"};
    for (const std::string& group : groups) {
      fs::create_directories(parent + "/" + group);
      std::ofstream(parent + "/" + group + "/cgroup.procs");  // a fake tree's files: no tasks
    }
    parents.push_back(parent);
  }
  const OrphanSweep sweep = reap_orphan_groups(parents, [](pid_t pid) { return pid == 222; });
  EXPECT_TRUE(sweep.failed.empty()) << sweep.failed.front();
  EXPECT_EQ(sweep.groups, 2u * 4u) << "111's two groups (one with a subgroup) and our own pid's, in both";
  for (const std::string& parent : parents) {
    EXPECT_FALSE(fs::exists(parent + "/box-111-1"));
    EXPECT_FALSE(fs::exists(parent + "/box-111-2"));
    EXPECT_FALSE(fs::exists(parent + "/box-" + std::to_string(::getpid()) + "-3"))
        << "our own pid's groups can only be a predecessor's";
    EXPECT_TRUE(fs::exists(parent + "/box-222-1")) << "a live daemon's group is not touched";
    EXPECT_TRUE(fs::exists(parent + "/not-a-box"));
  }
  EXPECT_TRUE(agentbox_group_parents(scratch.path()).empty()) << "no cgroup mount under a plain directory";
}

}  // namespace
}  // namespace agentbox
