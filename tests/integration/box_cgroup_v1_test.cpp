// The v1 driver on this machine's real hierarchies (CI machines mount cgroup v1), as root:
// limits are written and enforced (pids, memory), tasks land in every controller, usage is
// read, destroy kills and removes. Groups are named test-<pid>-<n> and always destroyed.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "box/cgroup.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRoot = "/sys/fs/cgroup";
constexpr const char* kControllers[] = {"memory", "pids", "cpu", "cpuacct"};
constexpr uint64_t kMiB = 1ull << 20;

Limits test_limits() {
  Limits l;
  l.memory_bytes = 64 * kMiB;
  l.pids = 20;
  l.cpu_millicores = 500;
  return l;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// controller -> cgroup path, from /proc/<pid>/cgroup ("4:memory:/agentbox/x";
// "1:cpu,cpuacct:/..." lists two controllers).
std::map<std::string, std::string> cgroups_of(pid_t pid) {
  std::map<std::string, std::string> out;
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/cgroup"));
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    std::istringstream names(line.substr(a + 1, b - a - 1));
    for (std::string n; std::getline(names, n, ',');) out[n] = line.substr(b + 1);
  }
  return out;
}

// A forked child held at a gate until the parent has attached it, then running `body`,
// which reports to the parent through `report` and may block.
struct Child {
  pid_t pid = -1;
  UniqueFd gate;    // parent writes one byte to let the child go
  UniqueFd report;  // what the child sends back
};

class CgroupV1Real : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Grandchildren orphaned by a killed child come back to us, to be reaped in TearDown.
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  }

  void SetUp() override {
    std::string why;
    driver_ = CgroupDriver::detect(kRoot, &why);
    ASSERT_NE(driver_, nullptr) << why;
    ASSERT_EQ(driver_->kind(), "v1") << why;
  }

  void TearDown() override {
    for (auto& group : groups_) {
      try {
        group->destroy();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "cleanup: " << e.what();
      }
    }
    for (pid_t pid : children_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    for (const auto& name : names_) {
      for (const char* c : kControllers) {
        const std::string dir = std::string(kRoot) + "/" + c + "/agentbox/" + name;
        EXPECT_FALSE(fs::exists(dir)) << "left behind: " << dir;
      }
    }
  }

  Cgroup& make_group(const Limits& limits) {
    static int n = 0;
    names_.push_back("test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    groups_.push_back(driver_->create(names_.back(), limits));
    return *groups_.back();
  }

  std::string dir_of(const char* controller) const {
    return std::string(kRoot) + "/" + controller + "/agentbox/" + names_.back();
  }

  Child fork_gated(const std::function<void(int report_fd)>& body) {
    int gate[2], report[2];
    EXPECT_EQ(::pipe2(gate, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(report, O_CLOEXEC), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      ::close(report[0]);
      char go;
      if (::read(gate[0], &go, 1) != 1) ::_exit(100);
      body(report[1]);
      ::_exit(0);
    }
    ::close(gate[0]);
    ::close(report[1]);
    children_.push_back(pid);
    return Child{pid, UniqueFd(gate[1]), UniqueFd(report[0])};
  }

  static void open_gate(const Child& c) { ASSERT_EQ(::write(c.gate.get(), "g", 1), 1); }

  // Reads exactly n bytes the child reported, within a deadline.
  static std::string read_report(const Child& c, size_t n, int timeout_ms = 20000) {
    std::string out;
    while (out.size() < n) {
      pollfd p{c.report.get(), POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) != 1) break;
      char buf[256];
      const ssize_t got = ::read(c.report.get(), buf, std::min(sizeof buf, n - out.size()));
      if (got <= 0) break;
      out.append(buf, static_cast<size_t>(got));
    }
    return out;
  }

  // Waits for pid to end within a deadline; returns its wait status, or -1.
  int wait_for(pid_t pid, std::chrono::seconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        std::erase(children_, pid);
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  std::unique_ptr<CgroupDriver> driver_;
  std::vector<std::unique_ptr<Cgroup>> groups_;
  std::vector<std::string> names_;
  std::vector<pid_t> children_;
};

TEST_F(CgroupV1Real, LimitsAreWrittenToTheKernel) {
  make_group(test_limits());
  EXPECT_EQ(trim(read_file(dir_of("memory") + "/memory.limit_in_bytes")), "67108864");
  const std::string memsw = dir_of("memory") + "/memory.memsw.limit_in_bytes";
  ASSERT_TRUE(fs::exists(memsw)) << "this machine has swap accounting";
  EXPECT_EQ(trim(read_file(memsw)), "67108864");
  EXPECT_EQ(trim(read_file(dir_of("pids") + "/pids.max")), "20");
  EXPECT_EQ(trim(read_file(dir_of("cpu") + "/cpu.cfs_period_us")), "100000");
  EXPECT_EQ(trim(read_file(dir_of("cpu") + "/cpu.cfs_quota_us")), "50000");
}

TEST_F(CgroupV1Real, AGroupWithoutLimitsIsUnlimitedWithTheDefaultPeriod) {
  // A new group is left at the kernel's defaults (nothing written): what the box relies on.
  make_group(Limits{.memory_bytes = 0, .pids = 0, .cpu_millicores = 0});
  EXPECT_GE(std::stoull(read_file(dir_of("memory") + "/memory.limit_in_bytes")), 1ull << 62);
  EXPECT_EQ(trim(read_file(dir_of("pids") + "/pids.max")), "max");
  EXPECT_EQ(trim(read_file(dir_of("cpu") + "/cpu.cfs_period_us")), "100000");
  EXPECT_EQ(trim(read_file(dir_of("cpu") + "/cpu.cfs_quota_us")), "-1");
}

TEST_F(CgroupV1Real, AGroupLeftBehindIsTakenOverWithEveryValueRewritten) {
  // As after a daemon crash: the group exists with someone's old limits and a changed period.
  const std::string name = "test-" + std::to_string(::getpid()) + "-left";
  for (const char* c : kControllers) {
    const std::string dir = std::string(kRoot) + "/" + c + "/agentbox/" + name;
    ASSERT_TRUE(fs::create_directory(dir)) << dir;
  }
  auto at = [&](const char* c, const char* knob) {
    return std::string(kRoot) + "/" + c + "/agentbox/" + name + "/" + knob;
  };
  write_file(at("memory", "memory.limit_in_bytes"), "8388608");
  write_file(at("pids", "pids.max"), "3");
  write_file(at("cpu", "cpu.cfs_period_us"), "50000");
  write_file(at("cpu", "cpu.cfs_quota_us"), "10000");

  names_.push_back(name);
  groups_.push_back(driver_->create(name, Limits{.memory_bytes = 0, .pids = 0, .cpu_millicores = 0}));
  EXPECT_GE(std::stoull(read_file(at("memory", "memory.limit_in_bytes"))), 1ull << 62);
  EXPECT_EQ(trim(read_file(at("pids", "pids.max"))), "max");
  EXPECT_EQ(trim(read_file(at("cpu", "cpu.cfs_period_us"))), "100000");
  EXPECT_EQ(trim(read_file(at("cpu", "cpu.cfs_quota_us"))), "-1");
}

TEST_F(CgroupV1Real, ALimitsOnlyGroupHoldsItsTaskInPidsAloneAndStillLimitsIt) {
  // `agentbox run` without --memory/--cpu: pids only (what stops a fork bomb), nothing else made.
  names_.push_back("test-" + std::to_string(::getpid()) + "-pids-only");
  const Limits limits{.memory_bytes = 0, .pids = 5, .cpu_millicores = 0};
  groups_.push_back(driver_->create(names_.back(), limits, CgroupUse::limits_only));
  Cgroup& group = *groups_.back();
  for (const char* c : {"memory", "cpu", "cpuacct"}) EXPECT_FALSE(fs::exists(dir_of(c))) << c;
  EXPECT_EQ(trim(read_file(dir_of("pids") + "/pids.max")), "5");

  const Child child = fork_gated([](int report) {
    int forked = 0;
    while (forked < 20) {
      const pid_t p = ::fork();
      if (p == 0) {
        for (;;) ::pause();
      }
      if (p < 0) break;
      ++forked;
    }
    const char n = static_cast<char>('0' + forked);
    if (::write(report, &n, 1) != 1) ::_exit(102);
    for (;;) ::pause();
  });
  group.attach(child.pid);
  EXPECT_EQ(cgroups_of(child.pid)["pids"], "/agentbox/" + names_.back());
  EXPECT_NE(cgroups_of(child.pid)["memory"], "/agentbox/" + names_.back());
  open_gate(child);
  EXPECT_EQ(read_report(child, 1), "4");  // 5 tasks: the child and 4 of its children
  EXPECT_EQ(group.usage().pids, 5u);
  EXPECT_EQ(group.usage().memory_bytes, 0u) << "no memory group, no reading";
  group.destroy();
  const int status = wait_for(child.pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

TEST_F(CgroupV1Real, AttachedChildIsInEveryControllerAndCounted) {
  Cgroup& group = make_group(test_limits());
  const Child child = fork_gated([](int report) {
    // Touch 4 MiB and burn some CPU after joining, so both are charged to the group.
    const size_t len = 4 * kMiB;
    void* mem = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) ::_exit(101);
    for (size_t i = 0; i < len; i += 4096) static_cast<volatile char*>(mem)[i] = 1;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
    while (std::chrono::steady_clock::now() < until) {
    }
    if (::write(report, "r", 1) != 1) ::_exit(102);
    for (;;) ::pause();
  });
  group.attach(child.pid);
  open_gate(child);
  ASSERT_EQ(read_report(child, 1), "r");

  const auto cgroups = cgroups_of(child.pid);
  for (const char* c : kControllers) {
    ASSERT_TRUE(cgroups.count(c)) << c;
    EXPECT_EQ(cgroups.at(c), "/agentbox/" + names_.back()) << c;
  }

  const CgroupUsage u = group.usage();
  EXPECT_GE(u.pids, 1u);
  EXPECT_GE(u.memory_bytes, 4 * kMiB);
  EXPECT_GE(u.memory_peak_bytes, u.memory_bytes);
  EXPECT_GT(u.cpu_usec, 0u);
  EXPECT_EQ(u.oom_kills, 0u);
}

TEST_F(CgroupV1Real, ForkLoopInsideTheGroupGetsEagainAtThePidsLimit) {
  Cgroup& group = make_group(test_limits());
  struct Result {
    int forked;
    int err;
  };
  const Child child = fork_gated([](int report) {
    Result r{0, 0};
    for (int i = 0; i < 100; ++i) {
      const pid_t p = ::fork();
      if (p == 0) {
        for (;;) ::pause();
      }
      if (p < 0) {
        r.err = errno;
        break;
      }
      ++r.forked;
    }
    if (::write(report, &r, sizeof r) != sizeof r) ::_exit(102);
    for (;;) ::pause();
  });
  group.attach(child.pid);
  open_gate(child);
  const std::string got = read_report(child, sizeof(Result));
  ASSERT_EQ(got.size(), sizeof(Result));
  Result r;
  std::memcpy(&r, got.data(), sizeof r);
  EXPECT_EQ(r.err, EAGAIN);
  EXPECT_EQ(r.forked, 19);  // 20 tasks: the child and 19 of its children
  EXPECT_EQ(group.usage().pids, 20u);

  group.destroy();
  const int status = wait_for(child.pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  for (const char* c : kControllers) EXPECT_FALSE(fs::exists(dir_of(c))) << c;
}

// How a box's init joins on v1: through the group's `tasks` files opened by the parent, writing
// "0" (itself). It must end up in every hierarchy and under the limits, as if attached by pid.
TEST_F(CgroupV1Real, SelfJoinedChildIsInEveryControllerAndHeldAtThePidsLimit) {
  Cgroup& group = make_group(test_limits());
  std::vector<UniqueFd> tasks = group.open_self_join();
  ASSERT_FALSE(tasks.empty());
  std::vector<int> fds;
  for (const UniqueFd& fd : tasks) fds.push_back(fd.get());
  const Child child = fork_gated([&fds](int report) {
    for (int fd : fds)
      if (::write(fd, "0", 1) != 1) ::_exit(103);
    int forked = 0;
    for (int i = 0; i < 100; ++i) {
      const pid_t p = ::fork();
      if (p == 0) {
        for (;;) ::pause();
      }
      if (p < 0) break;
      ++forked;
    }
    if (::write(report, &forked, sizeof forked) != sizeof forked) ::_exit(102);
    for (;;) ::pause();
  });
  tasks.clear();  // the child has its own copies
  open_gate(child);
  const std::string got = read_report(child, sizeof(int));
  ASSERT_EQ(got.size(), sizeof(int));
  int forked = 0;
  std::memcpy(&forked, got.data(), sizeof forked);
  EXPECT_EQ(forked, 19);  // 20 tasks: the child and 19 of its children
  const auto cgroups = cgroups_of(child.pid);
  for (const char* c : kControllers) {
    ASSERT_TRUE(cgroups.count(c)) << c;
    EXPECT_EQ(cgroups.at(c), "/agentbox/" + names_.back()) << c;
  }
}

TEST_F(CgroupV1Real, ChildTouching200MiBIn64MiBIsOomKilled) {
  Cgroup& group = make_group(test_limits());
  const Child child = fork_gated([](int) {
    const size_t len = 200 * kMiB;
    void* mem = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) ::_exit(101);
    for (size_t i = 0; i < len; i += 4096) static_cast<volatile char*>(mem)[i] = 1;
    ::_exit(0);  // not reached when the limit holds
  });
  group.attach(child.pid);
  open_gate(child);
  const int status = wait_for(child.pid);
  ASSERT_NE(status, -1) << "the memory hog neither finished nor was killed";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;

  const CgroupUsage u = group.usage();
  ASSERT_THAT(read_file(dir_of("memory") + "/memory.oom_control"), ::testing::HasSubstr("oom_kill "))
      << "this kernel reports oom kills per group";
  EXPECT_GE(u.oom_kills, 1u);
  EXPECT_LE(u.memory_peak_bytes, 64 * kMiB);
  EXPECT_GT(u.memory_peak_bytes, 32 * kMiB);
}

TEST_F(CgroupV1Real, DestroyKillsRemainingTasksAndRemovesTheDirectories) {
  Cgroup& group = make_group(test_limits());
  const Child child = fork_gated([](int report) {
    if (::fork() == 0) {
      for (;;) ::pause();  // a grandchild, also in the group
    }
    if (::write(report, "r", 1) != 1) ::_exit(102);
    for (;;) ::pause();
  });
  group.attach(child.pid);
  open_gate(child);
  ASSERT_EQ(read_report(child, 1), "r");
  ASSERT_EQ(group.usage().pids, 2u);

  group.destroy();
  const int status = wait_for(child.pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  for (const char* c : kControllers) {
    EXPECT_FALSE(fs::exists(dir_of(c))) << c;
    EXPECT_TRUE(fs::exists(std::string(kRoot) + "/" + c + "/agentbox")) << c;
  }
  EXPECT_NO_THROW(group.destroy());
  EXPECT_THROW(group.attach(child.pid), Error);
}

}  // namespace
}  // namespace agentbox
