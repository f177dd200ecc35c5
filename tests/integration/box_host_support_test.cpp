// The host probe and `agentbox doctor` on this machine, which is CI's kind: everything a root
// daemon requires must be found (a missing feature fails here, never skips), and probing is
// cheap and leaves no processes or descriptors behind.
#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "box/contain/landlock.hpp"
#include "box/contain/seccomp.hpp"
#include "box/host_support.hpp"
#include "cli/doctor.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const HostFeature& feature(const std::vector<HostFeature>& features, const std::string& name) {
  for (const auto& f : features) {
    if (f.name == name) return f;
  }
  throw std::runtime_error("no feature named " + name);
}

int open_fd_count() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (::readdir(d)) ++n;
  ::closedir(d);
  return n;
}

TEST(HostSupport, EveryFeatureARootDaemonRequiresIsPresent) {
  const auto features = probe_host(/*as_root=*/true);
  std::set<std::string> required;
  for (const auto& f : features) {
    if (!f.required) continue;
    required.insert(f.name);
    EXPECT_TRUE(f.present) << f.name << ": " << f.detail << " — fix: " << f.fix;
    EXPECT_FALSE(f.fix.empty()) << f.name;
  }
  const std::set<std::string> expected = {"network namespaces", "mount namespaces",  "pid namespaces", "ipc namespaces",
                                          "uts namespaces",     "cgroup namespaces", "landlock",       "seccomp",
                                          "no_new_privs",       "openat2",           "pidfd_open",     "cgroups",
                                          "capabilities",       "seccomp profile"};
  EXPECT_EQ(required, expected);
}

TEST(HostSupport, WithoutRootUserNamespacesAreRequiredAndCgroupsOptional) {
  const auto features = probe_host(/*as_root=*/false);
  const HostFeature& userns = feature(features, "user namespaces");
  EXPECT_TRUE(userns.required);
  EXPECT_TRUE(userns.present) << userns.detail;
  EXPECT_TRUE(feature(features, "max_user_namespaces").required);
  EXPECT_TRUE(feature(features, "max_user_namespaces").present);
  EXPECT_FALSE(feature(features, "cgroups").required);
  const auto root_features = probe_host(true);
  EXPECT_FALSE(feature(root_features, "user namespaces").required);
}

TEST(HostSupport, LandlockDetailGivesTheKernelsAbi) {
  const auto features = probe_host(true);
  const HostFeature& f = feature(features, "landlock");
  ASSERT_TRUE(f.present) << f.detail;
  const int abi = landlock::abi_version();
  ASSERT_GE(abi, 6) << "CI kernels have network rules and scopes";
  EXPECT_THAT(f.detail, StartsWith("ABI " + std::to_string(abi) + " "));
  EXPECT_THAT(f.detail, HasSubstr("fs, net, scope"));
}

TEST(HostSupport, CgroupDetailSaysV1AndWhere) {
  const auto features = probe_host(true);
  const HostFeature& f = feature(features, "cgroups");
  ASSERT_TRUE(f.present) << f.detail;
  EXPECT_THAT(f.detail, StartsWith("v1"));
  EXPECT_THAT(f.detail, HasSubstr("memory at /sys/fs/cgroup/memory"));
  EXPECT_THAT(f.detail, HasSubstr("pids at /sys/fs/cgroup/pids"));
}

TEST(HostSupport, OpenatAndSeccompDetailsSayWhatWasChecked) {
  const auto features = probe_host(true);
  EXPECT_EQ(feature(features, "openat2").detail, "RESOLVE_BENEATH enforced");
  EXPECT_THAT(feature(features, "seccomp").detail, HasSubstr("libseccomp 2."));
  EXPECT_TRUE(feature(features, "core_pattern").present);
  EXPECT_FALSE(feature(features, "core_pattern").detail.empty());
}

// CPU time spent by this process and its reaped children, which, unlike wall time, does not
// grow when CI runs many tests on two cores at once.
std::chrono::microseconds cpu_time_used() {
  auto of = [](int who) {
    rusage ru{};
    ::getrusage(who, &ru);
    return std::chrono::seconds(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           std::chrono::microseconds(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  };
  return of(RUSAGE_SELF) + of(RUSAGE_CHILDREN);
}

TEST(HostSupport, ProbingIsCheapAndLeavesNothingBehind) {
  probe_host(true);  // warm up: the first run maps libraries and creates agentbox's parents
  const int fds_before = open_fd_count();
  const auto cpu_before = cpu_time_used();
  const auto wall_before = std::chrono::steady_clock::now();
  probe_host(true);
  const auto cpu = cpu_time_used() - cpu_before;
  const auto wall = std::chrono::steady_clock::now() - wall_before;
#ifndef AGENTBOX_SANITIZE
  EXPECT_LT(cpu, std::chrono::milliseconds(50));
#else
  EXPECT_LT(cpu, std::chrono::milliseconds(150));  // ASan slows every fork and syscall
#endif
  EXPECT_LT(wall, std::chrono::seconds(2));
  EXPECT_EQ(open_fd_count(), fds_before);
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);  // no children left to reap
  EXPECT_EQ(errno, ECHILD);
}

TEST(Doctor, ReportsEverythingPresentAndWhatItWillEnforce) {
  std::ostringstream out;
  EXPECT_EQ(run_doctor(/*as_root=*/true, out), 0) << out.str();
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("Landlock ABI"));
  // The policy's version and size, as an operator comparing two hosts would read them.
  EXPECT_THAT(text,
              HasSubstr("seccomp allowlist v" + std::to_string(seccomp_filter::kPolicyVersion) + ": " +
                        std::to_string(seccomp_filter::allowed_syscalls().size()) + " syscalls, 5 more by argument"));
  EXPECT_THAT(text, HasSubstr("agentbox will enforce:"));
  EXPECT_THAT(text, HasSubstr("cgroup v1 memory/pids/cpu"));
  EXPECT_THAT(text, HasSubstr("namespaces: network, mount, pid, ipc, uts, cgroup\n"));
  EXPECT_THAT(text, Not(HasSubstr("MISSING")));
  EXPECT_THAT(text, Not(HasSubstr("missing:")));
  // The default config asks for quotas; this host has loop devices and mkfs.ext4.
  EXPECT_THAT(text, HasSubstr("loop_image: an ext4 image per account on a loop device, 10G and 1000000 inodes"));
  // What one box may take of the host's pty pool and TCP memory, and how many such boxes spend it.
  EXPECT_THAT(text, HasSubstr("at most 256 per box ([box] ptys)"));
  EXPECT_THAT(text, HasSubstr("at most 64M per box ([box] tcp_memory, cgroup v1)"));
}

TEST(Doctor, SaysHowManyBoxesAtTheirPtyLimitWouldSpendTheHostsPool) {
  testing::ScratchDir dir("doctor-ptys");
  const std::string config = dir.path() + "/config.toml";
  std::ofstream(config) << "[accounts]\nmax_active = 4\n[box]\nptys = 16\n";
  std::ostringstream out;
  EXPECT_EQ(run_doctor(/*as_root=*/true, out, config), 0) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("at most 16 per box ([box] ptys): max_active 4 boxes at their limit fit"));
}

TEST(Doctor, SaysWhenTheConfigTurnsQuotasOff) {
  testing::ScratchDir dir("doctor-storage");
  const std::string config = dir.path() + "/config.toml";
  std::ofstream(config) << "[accounts]\ndisk = \"0\"\n";
  std::ostringstream out;
  EXPECT_EQ(run_doctor(/*as_root=*/true, out, config), 0) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("plain: directories of the state filesystem, no quota"));
}

TEST(Doctor, OrdinaryUserModeEnforcesAUserNamespace) {
  std::ostringstream out;
  EXPECT_EQ(run_doctor(/*as_root=*/false, out), 0) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("namespaces: user, network"));
  EXPECT_THAT(out.str(), HasSubstr("a user namespace mapping the box uid to yours"));
}

}  // namespace
}  // namespace agentbox
