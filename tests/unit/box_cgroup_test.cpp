// The cgroup drivers against fake cgroupfs trees in a temp dir: detection and its fallback
// order, the limit values written, usage parsing, attach, destroy. The kernel creates a group's
// knob files on mkdir; a fake tree has them made up front by the helpers below (the driver
// takes an existing group directory over, as after a daemon crash).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "box/cgroup.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

Limits box_limits() {
  Limits l;
  l.memory_bytes = 64ull << 20;
  l.pids = 20;
  l.cpu_millicores = 500;
  return l;
}

Limits no_limits() {
  Limits l;
  l.memory_bytes = 0;
  l.pids = 0;
  l.cpu_millicores = 0;
  return l;
}

class FakeCgroupfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agentbox-cgroup-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }

  void TearDown() override {
    for (pid_t pid : children_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    fs::remove_all(root_);
  }

  std::string at(const std::string& rel) const { return root_ + "/" + rel; }

  void put(const std::string& rel, const std::string& content) {
    fs::create_directories(fs::path(at(rel)).parent_path());
    std::ofstream(at(rel)) << content;
  }

  std::string get(const std::string& rel) const {
    std::ifstream in(at(rel));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  void put_all(const std::string& dir, const std::map<std::string, std::string>& files) {
    for (const auto& [name, content] : files) put(dir + "/" + name, content);
  }

  // A unified hierarchy at root/<v2> offering `controllers`.
  void make_v2_root(const std::string& v2 = "",
                    const std::string& controllers = "cpuset cpu io memory hugetlb pids rdma") {
    const std::string base = v2.empty() ? "" : v2 + "/";
    put(base + "cgroup.controllers", controllers);
    put(base + "cgroup.subtree_control", "");
    put(base + "agentbox/cgroup.subtree_control", "");
  }

  // The files the kernel creates in a new v2 group.
  void make_v2_group(const std::string& name, bool with_kill_file = true, const std::string& base = "") {
    const std::string dir = base + "agentbox/" + name;
    put_all(dir, {{"cgroup.procs", ""},
                  {"memory.max", "max\n"},
                  {"memory.swap.max", "max\n"},
                  {"pids.max", "max\n"},
                  {"cpu.max", "max 100000\n"},
                  {"memory.current", "0\n"},
                  {"memory.peak", "0\n"},
                  {"pids.current", "0\n"},
                  {"cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"},
                  {"memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"}});
    if (with_kill_file) put(dir + "/cgroup.kill", "");
  }

  // v1 hierarchies as directories root/<controller>; with combined_cpu, one "cpu,cpuacct"
  // directory that cpu and cpuacct link to (the usual systemd layout).
  void make_v1_mounts(bool combined_cpu = false) {
    for (const char* c : {"memory", "pids"}) fs::create_directories(at(c));
    if (combined_cpu) {
      fs::create_directories(at("cpu,cpuacct"));
      fs::create_directory_symlink("cpu,cpuacct", at("cpu"));
      fs::create_directory_symlink("cpu,cpuacct", at("cpuacct"));
    } else {
      fs::create_directories(at("cpu"));
      fs::create_directories(at("cpuacct"));
    }
  }

  // The files the kernel creates in a new v1 group, in each hierarchy.
  void make_v1_group(const std::string& name, bool with_memsw = true) {
    const std::string g = "/agentbox/" + name;
    const std::map<std::string, std::string> common = {{"cgroup.procs", ""}, {"tasks", ""}};
    put_all("memory" + g, common);
    put_all("memory" + g, {{"memory.limit_in_bytes", "9223372036854771712\n"},
                           {"memory.swappiness", "60\n"},
                           {"memory.usage_in_bytes", "0\n"},
                           {"memory.max_usage_in_bytes", "0\n"},
                           {"memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"}});
    if (with_memsw) put("memory" + g + "/memory.memsw.limit_in_bytes", "9223372036854771712\n");
    put_all("pids" + g, common);
    put_all("pids" + g, {{"pids.max", "max\n"}, {"pids.current", "0\n"}});
    put_all("cpu" + g, common);
    put_all("cpu" + g, {{"cpu.cfs_period_us", "100000\n"}, {"cpu.cfs_quota_us", "-1\n"}});
    put_all("cpuacct" + g, common);
    put("cpuacct" + g + "/cpuacct.usage", "0\n");
  }

  std::unique_ptr<CgroupDriver> detect(std::string* why = nullptr) { return CgroupDriver::detect(root_, why); }

  // A child that waits to be killed.
  pid_t sleeper() {
    pid_t pid = ::fork();
    if (pid == 0) {
      for (;;) ::pause();
    }
    children_.push_back(pid);
    return pid;
  }

  // True when pid was killed by SIGKILL (reaps it).
  bool reaped_by_sigkill(pid_t pid) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return false;
    std::erase(children_, pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }

  std::string root_;
  std::vector<pid_t> children_;
};

// ---- detection and its fallback order ----

TEST_F(FakeCgroupfs, PrefersV2AndEnablesControllersForAgentboxGroups) {
  make_v2_root();
  make_v1_mounts();  // both present: v2 wins
  std::string why;
  auto driver = detect(&why);
  ASSERT_NE(driver, nullptr) << why;
  EXPECT_EQ(driver->kind(), "v2");
  EXPECT_THAT(why, HasSubstr(at("agentbox")));
  EXPECT_EQ(get("cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(get("agentbox/cgroup.subtree_control"), "+memory +pids +cpu");
}

TEST_F(FakeCgroupfs, V2LeavesSubtreeControlAloneWhenAlreadyEnabled) {
  make_v2_root();
  put("cgroup.subtree_control", "cpu io memory pids\n");
  ASSERT_NE(detect(), nullptr);
  EXPECT_EQ(get("cgroup.subtree_control"), "cpu io memory pids\n");
}

TEST_F(FakeCgroupfs, V2InACgroupNamespaceMovesTheDaemonIntoALeafFirst) {
  // A container's cgroup namespace: its root is a group of the host's (it has cgroup.type)
  // and holds the daemon, so it cannot delegate controllers until the daemon has left it.
  make_v2_root();
  put("cgroup.type", "domain\n");
  put("cgroup.procs", "1\n42\n");
  put("daemon/cgroup.procs", "");  // the kernel makes it with the directory
  std::string why;
  ASSERT_NE(detect(&why), nullptr) << why;
  EXPECT_EQ(get("daemon/cgroup.procs"), "1\n42\n");  // every process, one write each
  EXPECT_EQ(get("cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(get("agentbox/cgroup.subtree_control"), "+memory +pids +cpu");
}

TEST_F(FakeCgroupfs, V2AtTheRealRootMovesNothing) {
  // The host's root (no cgroup.type) is exempt from the rule and holds every host process.
  make_v2_root();
  put("cgroup.procs", "1\n42\n");
  ASSERT_NE(detect(), nullptr);
  EXPECT_FALSE(fs::exists(at("daemon")));
  EXPECT_EQ(get("cgroup.subtree_control"), "+memory +pids +cpu");
}

TEST_F(FakeCgroupfs, V2InACgroupNamespaceWithControllersOnMovesNothing) {
  // Already delegated (a restart, or a runtime that did it): nothing to move.
  make_v2_root();
  put("cgroup.type", "domain\n");
  put("cgroup.procs", "");
  put("cgroup.subtree_control", "cpu memory pids\n");
  ASSERT_NE(detect(), nullptr);
  EXPECT_FALSE(fs::exists(at("daemon")));
}

TEST_F(FakeCgroupfs, V2LeafMoveFailureIsTheReasonAndV1IsNext) {
  make_v2_root();
  put("cgroup.type", "domain\n");
  put("cgroup.procs", "42\n");
  fs::create_directories(at("daemon"));  // no cgroup.procs in it: the write cannot open it
  make_v1_mounts();
  std::string why;
  auto driver = detect(&why);
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(driver->kind(), "v1");  // the next choice, with the reason kept
  EXPECT_THAT(why, HasSubstr("open(" + at("daemon/cgroup.procs") + ")"));
  EXPECT_EQ(get("cgroup.subtree_control"), "");
}

TEST_F(FakeCgroupfs, V2OnHybridHostIsFoundUnderUnified) {
  make_v2_root("unified");
  auto driver = detect();
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(driver->kind(), "v2");
  make_v2_group("b1", true, "unified/");
  auto group = driver->create("b1", box_limits());
  EXPECT_EQ(group->path(), at("unified/agentbox/b1"));
  EXPECT_EQ(get("unified/agentbox/b1/pids.max"), "20");
  group->destroy();
  EXPECT_FALSE(fs::exists(at("unified/agentbox/b1")));
}

TEST_F(FakeCgroupfs, FallsBackToV1WhenV2HasNoControllers) {
  // This machine: an empty unified tree (controllers bound to v1) beside v1 hierarchies.
  make_v2_root("unified", "");
  make_v1_mounts();
  std::string why;
  auto driver = detect(&why);
  ASSERT_NE(driver, nullptr) << why;
  EXPECT_EQ(driver->kind(), "v1");
  EXPECT_THAT(why, HasSubstr("v1: memory at " + at("memory")));
  EXPECT_THAT(why, HasSubstr("unified/cgroup.controllers lacks memory, pids, cpu"));
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"})
    EXPECT_TRUE(fs::is_directory(at(std::string(c) + "/agentbox"))) << c;
}

TEST_F(FakeCgroupfs, FallsBackToV1WhenV2LacksOneController) {
  make_v2_root("", "cpu io memory");
  make_v1_mounts();
  std::string why;
  auto driver = detect(&why);
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(driver->kind(), "v1");
  EXPECT_THAT(why, HasSubstr("lacks pids"));
}

TEST_F(FakeCgroupfs, NoDriverWithoutControllersSaysWhy) {
  make_v2_root("unified", "");
  fs::create_directories(at("memory"));
  fs::create_directories(at("cpu"));  // no pids hierarchy
  std::string why;
  EXPECT_EQ(detect(&why), nullptr);
  EXPECT_THAT(why, HasSubstr("v2: "));
  EXPECT_THAT(why, HasSubstr("v1: no v1 hierarchy under " + root_ + " for pids"));
}

TEST_F(FakeCgroupfs, NoDriverOnAnEmptyTree) {
  std::string why;
  EXPECT_EQ(detect(&why), nullptr);
  EXPECT_THAT(why, HasSubstr("no cgroup2 hierarchy"));
}

TEST_F(FakeCgroupfs, NoDriverForAUserWhoCannotCreateGroups) {
  // Parents made earlier by root exist but are not writable by an ordinary user.
  make_v2_root("unified", "");
  make_v1_mounts();
  ASSERT_NE(detect(), nullptr);
  fs::permissions(root_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                             fs::perms::others_exec);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(2);
    std::string why;
    const bool refused = CgroupDriver::detect(root_, &why) == nullptr &&
                         why.find("access(" + at("memory/agentbox") + ", W_OK)") != std::string::npos;
    ::_exit(refused ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(FakeCgroupfs, RejectsGroupNamesThatAreNotOneComponent) {
  make_v2_root();
  auto driver = detect();
  ASSERT_NE(driver, nullptr);
  for (const char* bad : {"a/b", "..", "x..y", "", ".", "../agentbox"}) {
    EXPECT_THROW(driver->create(bad, box_limits()), Error) << bad;
  }
  make_v1_mounts();
  fs::remove(at("cgroup.controllers"));
  auto v1 = detect();
  ASSERT_NE(v1, nullptr);
  ASSERT_EQ(v1->kind(), "v1");
  EXPECT_THROW(v1->create("../../etc", box_limits()), Error);
}

// ---- v2 ----

TEST_F(FakeCgroupfs, V2WritesLimits) {
  make_v2_root();
  make_v2_group("box1");
  auto group = detect()->create("box1", box_limits());
  EXPECT_EQ(group->path(), at("agentbox/box1"));
  EXPECT_EQ(get("agentbox/box1/memory.max"), "67108864");
  EXPECT_EQ(get("agentbox/box1/memory.swap.max"), "0");
  EXPECT_EQ(get("agentbox/box1/pids.max"), "20");
  EXPECT_EQ(get("agentbox/box1/cpu.max"), "50000 100000");
}

TEST_F(FakeCgroupfs, V2WritesMaxForNoLimitAndTheMinimumQuota) {
  make_v2_root();
  make_v2_group("box1");
  auto driver = detect();
  driver->create("box1", no_limits());
  EXPECT_EQ(get("agentbox/box1/memory.max"), "max");
  EXPECT_EQ(get("agentbox/box1/memory.swap.max"), "max");
  EXPECT_EQ(get("agentbox/box1/pids.max"), "max");
  EXPECT_EQ(get("agentbox/box1/cpu.max"), "max 100000");
  Limits tiny = no_limits();
  tiny.cpu_millicores = 5;  // 500 us per period is below the kernel's 1 ms minimum
  driver->create("box1", tiny);
  EXPECT_EQ(get("agentbox/box1/cpu.max"), "1000 100000");
}

TEST_F(FakeCgroupfs, V2WithoutSwapAccountingSkipsSwapMax) {
  make_v2_root();
  make_v2_group("box1");
  fs::remove(at("agentbox/box1/memory.swap.max"));
  detect()->create("box1", box_limits());
  EXPECT_FALSE(fs::exists(at("agentbox/box1/memory.swap.max")));
  EXPECT_EQ(get("agentbox/box1/memory.max"), "67108864");
}

TEST_F(FakeCgroupfs, V2UsageIsParsed) {
  make_v2_root();
  make_v2_group("box1");
  auto group = detect()->create("box1", box_limits());
  put("agentbox/box1/memory.current", "1048576\n");
  put("agentbox/box1/memory.peak", "2097152\n");
  put("agentbox/box1/pids.current", "3\n");
  put("agentbox/box1/cpu.stat", "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\n");
  put("agentbox/box1/memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n");
  const CgroupUsage u = group->usage();
  EXPECT_EQ(u.memory_bytes, 1048576u);
  EXPECT_EQ(u.memory_peak_bytes, 2097152u);
  EXPECT_EQ(u.pids, 3u);
  EXPECT_EQ(u.cpu_usec, 123456u);
  EXPECT_EQ(u.oom_kills, 2u);
  fs::remove(at("agentbox/box1/memory.peak"));  // kernels before 5.19
  EXPECT_EQ(group->usage().memory_peak_bytes, 0u);
}

TEST_F(FakeCgroupfs, V2AttachWritesThePidAndCloneFdIsTheGroupDir) {
  make_v2_root();
  make_v2_group("box1");
  auto group = detect()->create("box1", box_limits());
  group->attach(4242);
  EXPECT_EQ(get("agentbox/box1/cgroup.procs"), "4242");
  EXPECT_TRUE(group->open_self_join().empty());  // v2 attaches by pid (or clones into)
  const int fd = group->clone_into_fd();
  ASSERT_GE(fd, 0);
  struct stat by_fd {
  }, by_path{};
  ASSERT_EQ(::fstat(fd, &by_fd), 0);
  ASSERT_EQ(::stat(at("agentbox/box1").c_str(), &by_path), 0);
  EXPECT_TRUE(S_ISDIR(by_fd.st_mode));
  EXPECT_EQ(by_fd.st_ino, by_path.st_ino);
  EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
}

TEST_F(FakeCgroupfs, V2DestroyUsesCgroupKillAndRemovesTheDir) {
  make_v2_root();
  make_v2_group("box1");
  auto group = detect()->create("box1", box_limits());
  group->destroy();
  EXPECT_FALSE(fs::exists(at("agentbox/box1")));
  EXPECT_EQ(group->clone_into_fd(), -1);
  EXPECT_NO_THROW(group->destroy());        // idempotent
  EXPECT_TRUE(fs::exists(at("agentbox")));  // the parent is shared with other boxes
}

TEST_F(FakeCgroupfs, V2DestroyWritesOneToCgroupKill) {
  make_v2_root();
  make_v2_group("box1");
  auto group = detect()->create("box1", box_limits());
  // cgroup.kill as a FIFO with a reader here, so the value written survives the rmdir.
  fs::remove(at("agentbox/box1/cgroup.kill"));
  ASSERT_EQ(::mkfifo(at("agentbox/box1/cgroup.kill").c_str(), 0600), 0);
  const int reader = ::open(at("agentbox/box1/cgroup.kill").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  group->destroy();
  char buf[8] = {};
  const ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "1");
  EXPECT_FALSE(fs::exists(at("agentbox/box1")));
}

TEST_F(FakeCgroupfs, DestroyReportsAGroupThatCannotBeRemoved) {
  make_v2_root();
  make_v2_group("box1");
  auto group = detect()->create("box1", box_limits());
  fs::create_directories(at("agentbox/box1/nested"));  // rmdir keeps failing
  try {
    group->destroy();
    FAIL() << "destroy succeeded with a nested directory left";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("rmdir(" + at("agentbox/box1") + ")"));
  }
}

TEST_F(FakeCgroupfs, V2DestroyWithoutCgroupKillSigkillsEachTask) {
  make_v2_root();
  make_v2_group("box1", /*with_kill_file=*/false);
  auto group = detect()->create("box1", box_limits());
  const pid_t pid = sleeper();
  put("agentbox/box1/cgroup.procs", std::to_string(pid) + "\n");
  group->destroy();
  EXPECT_TRUE(reaped_by_sigkill(pid));
  EXPECT_FALSE(fs::exists(at("agentbox/box1")));
}

TEST_F(FakeCgroupfs, V2FailedCreateNamesTheFileAndValueAndRemovesTheGroup) {
  make_v2_root();
  make_v2_group("box1");
  fs::remove(at("agentbox/box1/pids.max"));
  try {
    detect()->create("box1", box_limits());
    FAIL() << "create succeeded without pids.max";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("write(" + at("agentbox/box1/pids.max") + ", \"20\")"));
    EXPECT_EQ(e.code(), ENOENT);
  }
  EXPECT_FALSE(fs::exists(at("agentbox/box1")));
}

// ---- v1 ----

TEST_F(FakeCgroupfs, V1WritesLimitsInEachHierarchy) {
  make_v1_mounts();
  make_v1_group("box1");
  auto driver = detect();
  ASSERT_EQ(driver->kind(), "v1");
  auto group = driver->create("box1", box_limits());
  EXPECT_EQ(get("memory/agentbox/box1/memory.limit_in_bytes"), "67108864");
  EXPECT_EQ(get("memory/agentbox/box1/memory.memsw.limit_in_bytes"), "67108864");
  EXPECT_EQ(get("memory/agentbox/box1/memory.swappiness"), "60\n");  // memsw covers swap
  EXPECT_EQ(get("pids/agentbox/box1/pids.max"), "20");
  EXPECT_EQ(get("cpu/agentbox/box1/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(get("cpu/agentbox/box1/cpu.cfs_quota_us"), "50000");
  EXPECT_EQ(group->path(), at("memory/agentbox/box1"));
  EXPECT_EQ(group->clone_into_fd(), -1);
}

// cgroup v1 charges a group's TCP socket buffers to it, and bounds them, only once
// memory.kmem.tcp.limit_in_bytes is written; v2 charges them to memory.max and has no such knob.
TEST_F(FakeCgroupfs, V1BoundsTheBoxsTcpSocketMemory) {
  make_v1_mounts();
  make_v1_group("box1");
  put("memory/agentbox/box1/memory.kmem.tcp.limit_in_bytes", "9223372036854771712\n");
  Limits limits = box_limits();
  limits.tcp_memory_bytes = 64ull << 20;
  detect()->create("box1", limits);
  EXPECT_EQ(get("memory/agentbox/box1/memory.kmem.tcp.limit_in_bytes"), "67108864");
  // A group taken over without a bound: written unlimited (charged, not bounded).
  limits.tcp_memory_bytes = 0;
  detect()->create("box1", limits);
  EXPECT_EQ(get("memory/agentbox/box1/memory.kmem.tcp.limit_in_bytes"), "-1");
}

// `agentbox run` joins the memory hierarchy for a TCP bound alone (its memory is not limited).
TEST_F(FakeCgroupfs, V1LimitsOnlyGroupJoinsMemoryForATcpBoundAlone) {
  make_v1_mounts();
  put_all("pids/agentbox/run1", {{"cgroup.procs", ""}, {"pids.max", "max\n"}});
  put_all("memory/agentbox/run1", {{"cgroup.procs", ""},
                                   {"memory.limit_in_bytes", "9223372036854771712\n"},
                                   {"memory.kmem.tcp.limit_in_bytes", "9223372036854771712\n"}});
  Limits tcp_only = no_limits();
  tcp_only.tcp_memory_bytes = 16ull << 20;
  auto group = detect()->create("run1", tcp_only, CgroupUse::limits_only);
  EXPECT_EQ(get("memory/agentbox/run1/memory.kmem.tcp.limit_in_bytes"), "16777216");
  group->attach(4242);
  EXPECT_EQ(get("memory/agentbox/run1/cgroup.procs"), "4242");
  EXPECT_FALSE(fs::exists(at("cpu/agentbox/run1")));
}

TEST_F(FakeCgroupfs, V2HasNoTcpKnobToWrite) {
  make_v2_root();
  make_v2_group("box1");
  Limits limits = box_limits();
  limits.tcp_memory_bytes = 64ull << 20;
  detect()->create("box1", limits);
  EXPECT_EQ(get("agentbox/box1/memory.max"), "67108864");  // where v2 charges socket buffers
  EXPECT_FALSE(fs::exists(at("agentbox/box1/memory.kmem.tcp.limit_in_bytes")));
}

TEST_F(FakeCgroupfs, V1WritesUnlimitedValuesForNoLimit) {
  make_v1_mounts();
  make_v1_group("box1");
  detect()->create("box1", no_limits());
  EXPECT_EQ(get("memory/agentbox/box1/memory.limit_in_bytes"), "-1");
  EXPECT_EQ(get("memory/agentbox/box1/memory.memsw.limit_in_bytes"), "-1");
  EXPECT_EQ(get("pids/agentbox/box1/pids.max"), "max");
  EXPECT_EQ(get("cpu/agentbox/box1/cpu.cfs_quota_us"), "-1");
}

// The kernel makes a new group unlimited; a knob write for a default is work (a cpu one walks
// every cpu cgroup on the host). In a fake tree a new group has no knob files, so any write
// would fail with ENOENT.
TEST_F(FakeCgroupfs, V1NewGroupWithoutLimitsGetsNothingWritten) {
  make_v1_mounts();
  detect()->create("fresh", no_limits());
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"}) {
    const std::string dir = at(std::string(c) + "/agentbox/fresh");
    EXPECT_TRUE(fs::is_directory(dir)) << dir;
    EXPECT_TRUE(fs::is_empty(dir)) << dir;
  }
}

TEST_F(FakeCgroupfs, V2NewGroupWithoutLimitsGetsNothingWritten) {
  make_v2_root();
  detect()->create("fresh", no_limits());
  EXPECT_TRUE(fs::is_directory(at("agentbox/fresh")));
  EXPECT_TRUE(fs::is_empty(at("agentbox/fresh")));
}

TEST_F(FakeCgroupfs, V1WithoutSwapAccountingSetsSwappinessZero) {
  make_v1_mounts();
  make_v1_group("box1", /*with_memsw=*/false);
  detect()->create("box1", box_limits());
  EXPECT_FALSE(fs::exists(at("memory/agentbox/box1/memory.memsw.limit_in_bytes")));
  EXPECT_EQ(get("memory/agentbox/box1/memory.limit_in_bytes"), "67108864");
  EXPECT_EQ(get("memory/agentbox/box1/memory.swappiness"), "0");
}

TEST_F(FakeCgroupfs, V1UsageIsParsedAndCpuacctNanosecondsBecomeMicroseconds) {
  make_v1_mounts();
  make_v1_group("box1");
  auto group = detect()->create("box1", box_limits());
  put("memory/agentbox/box1/memory.usage_in_bytes", "4096000\n");
  put("memory/agentbox/box1/memory.max_usage_in_bytes", "8192000\n");
  put("memory/agentbox/box1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
  put("pids/agentbox/box1/pids.current", "7\n");
  put("cpuacct/agentbox/box1/cpuacct.usage", "2500000999\n");
  const CgroupUsage u = group->usage();
  EXPECT_EQ(u.memory_bytes, 4096000u);
  EXPECT_EQ(u.memory_peak_bytes, 8192000u);
  EXPECT_EQ(u.pids, 7u);
  EXPECT_EQ(u.cpu_usec, 2500000u);
  EXPECT_EQ(u.oom_kills, 3u);
  // Older kernels have no oom_kill line.
  put("memory/agentbox/box1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
  EXPECT_EQ(group->usage().oom_kills, 0u);
}

TEST_F(FakeCgroupfs, V1AttachWritesThePidToEveryHierarchy) {
  make_v1_mounts();
  make_v1_group("box1");
  auto group = detect()->create("box1", box_limits());
  group->attach(4242);
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"})
    EXPECT_EQ(get(std::string(c) + "/agentbox/box1/cgroup.procs"), "4242") << c;
}

// init joins a v1 group itself: one writable `tasks` file per hierarchy, each taking "0".
TEST_F(FakeCgroupfs, V1SelfJoinOpensTheTasksFileOfEveryHierarchy) {
  make_v1_mounts();
  make_v1_group("box1");
  auto group = detect()->create("box1", box_limits());
  std::vector<UniqueFd> fds = group->open_self_join();
  ASSERT_EQ(fds.size(), 4u);
  for (const UniqueFd& fd : fds) ASSERT_EQ(::write(fd.get(), "0", 1), 1);
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"}) {
    EXPECT_EQ(get(std::string(c) + "/agentbox/box1/tasks"), "0") << c;
    EXPECT_EQ(get(std::string(c) + "/agentbox/box1/cgroup.procs"), "") << c;  // no attach by pid
  }
}

// A group whose hierarchy lost its files cannot be joined: the error names the file.
TEST_F(FakeCgroupfs, V1SelfJoinNamesAMissingTasksFile) {
  make_v1_mounts();
  make_v1_group("box1");
  auto group = detect()->create("box1", box_limits());
  fs::remove(at("pids/agentbox/box1/tasks"));
  try {
    group->open_self_join();
    FAIL() << "opened a missing tasks file";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("open(" + at("pids/agentbox/box1/tasks") + ")"));
  }
}

// A box whose usage nobody reads (`agentbox run`) joins only the hierarchies it limits, and pids
// always. Only pids' knob files exist here: touching another hierarchy would make its directory.
TEST_F(FakeCgroupfs, V1LimitsOnlyGroupJoinsPidsAloneWhenNoOtherLimitIsSet) {
  make_v1_mounts();
  put_all("pids/agentbox/run1", {{"cgroup.procs", ""}, {"pids.max", "max\n"}, {"pids.current", "2\n"}});
  Limits pids_only = no_limits();
  pids_only.pids = 20;
  auto group = detect()->create("run1", pids_only, CgroupUse::limits_only);
  EXPECT_EQ(get("pids/agentbox/run1/pids.max"), "20");
  group->attach(4242);
  EXPECT_EQ(get("pids/agentbox/run1/cgroup.procs"), "4242");
  const CgroupUsage u = group->usage();
  EXPECT_EQ(u.pids, 2u);
  EXPECT_EQ(u.memory_bytes, 0u);
  EXPECT_EQ(group->path(), at("pids/agentbox/run1"));
  for (const char* c : {"memory", "cpu", "cpuacct"}) {
    EXPECT_FALSE(fs::exists(at(std::string(c) + "/agentbox/run1"))) << c;
  }
  group->destroy();
  EXPECT_FALSE(fs::exists(at("pids/agentbox/run1")));
}

TEST_F(FakeCgroupfs, V1LimitsOnlyGroupJoinsTheHierarchiesOfTheLimitsItSets) {
  make_v1_mounts();
  make_v1_group("run1");
  fs::remove_all(at("cpuacct/agentbox/run1"));
  auto group = detect()->create("run1", box_limits(), CgroupUse::limits_only);
  EXPECT_EQ(get("memory/agentbox/run1/memory.limit_in_bytes"), "67108864");
  EXPECT_EQ(get("cpu/agentbox/run1/cpu.cfs_quota_us"), "50000");
  group->attach(4242);
  for (const char* c : {"memory", "pids", "cpu"}) {
    EXPECT_EQ(get(std::string(c) + "/agentbox/run1/cgroup.procs"), "4242") << c;
  }
  EXPECT_FALSE(fs::exists(at("cpuacct/agentbox/run1"))) << "usage only: not joined";
}

TEST_F(FakeCgroupfs, V1CombinedCpuCpuacctMountIsOneGroupDir) {
  make_v1_mounts(/*combined_cpu=*/true);
  const std::string g = "cpu,cpuacct/agentbox/box1";
  make_v1_group("box1");  // cpu and cpuacct files land in the one dir through the links
  put(g + "/cpuacct.usage", "7000\n");
  std::string why;
  auto driver = detect(&why);
  ASSERT_NE(driver, nullptr) << why;
  EXPECT_THAT(why, HasSubstr("cpu at " + at("cpu,cpuacct")));
  auto group = driver->create("box1", box_limits());
  EXPECT_EQ(get(g + "/cpu.cfs_quota_us"), "50000");
  EXPECT_EQ(group->usage().cpu_usec, 7u);
  group->attach(99);
  EXPECT_EQ(get(g + "/cgroup.procs"), "99");  // written once, not twice
  group->destroy();
  EXPECT_FALSE(fs::exists(at(g)));
}

TEST_F(FakeCgroupfs, V1DestroyKillsListedTasksAndRemovesEveryDir) {
  make_v1_mounts();
  make_v1_group("box1");
  auto group = detect()->create("box1", box_limits());
  const pid_t pid = sleeper();
  put("pids/agentbox/box1/cgroup.procs", std::to_string(pid) + "\n");
  group->destroy();
  EXPECT_TRUE(reaped_by_sigkill(pid));
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"}) {
    EXPECT_FALSE(fs::exists(at(std::string(c) + "/agentbox/box1"))) << c;
    EXPECT_TRUE(fs::exists(at(std::string(c) + "/agentbox"))) << c;
  }
  EXPECT_NO_THROW(group->destroy());
}

TEST_F(FakeCgroupfs, V1FailedCreateNamesTheFileAndValueAndRemovesTheGroup) {
  make_v1_mounts();
  make_v1_group("box1");
  fs::remove(at("pids/agentbox/box1/pids.max"));
  try {
    detect()->create("box1", box_limits());
    FAIL() << "create succeeded without pids.max";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("write(" + at("pids/agentbox/box1/pids.max") + ", \"20\")"));
  }
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"})
    EXPECT_FALSE(fs::exists(at(std::string(c) + "/agentbox/box1"))) << c;
}

}  // namespace
}  // namespace agentbox
