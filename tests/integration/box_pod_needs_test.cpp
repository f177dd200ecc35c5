// What the daemon needs from its container (box/pod_needs.hpp): the parsers on texts as the
// kernel writes them, and the probes on this machine (root with every capability, no seccomp
// filter, host users), where everything must be found.
#include <linux/capability.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "box/pod_needs.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const HostFeature& feature(const std::vector<HostFeature>& features, const std::string& name) {
  for (const auto& f : features) {
    if (f.name == name) return f;
  }
  throw std::runtime_error("no feature named " + name);
}

uint64_t all_needed() {
  uint64_t mask = 0;
  for (const auto& c : kDaemonCapabilities) mask |= uint64_t{1} << c.cap;
  return mask;
}

TEST(PodNeeds, TheCapabilityListIsTheManifestsOne) {
  // deploy/k8s adds exactly these (tests/deploy compares the manifests with doctor's output).
  std::set<std::string> names;
  for (const auto& c : kDaemonCapabilities) names.insert(c.name);
  EXPECT_EQ(names, (std::set<std::string>{"SYS_ADMIN", "NET_ADMIN", "SETUID", "SETGID", "SETPCAP", "CHOWN", "FOWNER",
                                          "DAC_OVERRIDE", "KILL"}));
  EXPECT_EQ(names.size(), std::size(kDaemonCapabilities));
}

TEST(PodNeeds, MissingCapabilitiesAreNamedInTheListsOrder) {
  EXPECT_THAT(missing_capabilities(all_needed()), IsEmpty());
  EXPECT_THAT(missing_capabilities(~uint64_t{0}), IsEmpty());
  const uint64_t without = all_needed() & ~(uint64_t{1} << CAP_KILL) & ~(uint64_t{1} << CAP_NET_ADMIN);
  EXPECT_THAT(missing_capabilities(without), ElementsAre("NET_ADMIN", "KILL"));
  EXPECT_EQ(missing_capabilities(0).size(), std::size(kDaemonCapabilities));
}

TEST(PodNeeds, StatusHexReadsTheNamedLine) {
  const std::string status =
      "Name:\tagentbox\nCapInh:\t0000000000000000\nCapEff:\t00000000a80425fb\n"
      "CapBnd:\t000001ffffffffff\nSeccomp:\t2\n";
  EXPECT_EQ(status_hex(status, "CapEff"), 0xa80425fbu);  // Docker's default set
  EXPECT_EQ(status_hex(status, "CapBnd"), 0x1ffffffffffu);
  EXPECT_THROW(status_hex(status, "CapAmb"), Error);
  // Docker's default set lacks SYS_ADMIN and NET_ADMIN and has the rest.
  EXPECT_THAT(missing_capabilities(0xa80425fb), ElementsAre("SYS_ADMIN", "NET_ADMIN"));
}

TEST(PodNeeds, OnlyTheInitialMapIsIdentity) {
  EXPECT_TRUE(uid_map_is_identity("         0          0 4294967295\n"));
  EXPECT_FALSE(uid_map_is_identity("         0  100000      65536\n"));  // hostUsers: false
  EXPECT_FALSE(uid_map_is_identity("         0          0      65536\n"));
  EXPECT_FALSE(uid_map_is_identity("0 0 4294967295\n1 1 1\n"));
  EXPECT_FALSE(uid_map_is_identity(""));
}

TEST(PodNeeds, ProcMasksAreTheMountsUnderProc) {
  // What runc lays over /proc with procMount: Default (trimmed).
  const std::string masked =
      "600 580 0:52 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
      "601 600 0:52 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
      "606 600 0:57 / /proc/acpi ro,relatime - tmpfs tmpfs ro\n"
      "607 600 0:5 /null /proc/kcore rw,nosuid - devtmpfs udev rw\n"
      "612 600 0:40 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw\n"
      "590 580 0:58 / /dev rw,nosuid - tmpfs tmpfs rw\n";
  EXPECT_THAT(proc_masks(masked), ElementsAre("/proc/bus", "/proc/acpi", "/proc/kcore"));
  EXPECT_THAT(proc_masks("600 580 0:52 / /proc rw - proc proc rw\n"), IsEmpty());
}

TEST(PodNeeds, ThisMachineGrantsEverythingARootDaemonNeeds) {
  const auto features = probe_pod_needs(/*as_root=*/true);
  const HostFeature& caps = feature(features, "capabilities");
  EXPECT_TRUE(caps.required);
  EXPECT_TRUE(caps.present) << caps.detail;
  // The detail names the whole list: what the manifest test reads from doctor.
  EXPECT_THAT(caps.detail, HasSubstr("the 9 needed (SYS_ADMIN NET_ADMIN SETUID SETGID SETPCAP CHOWN "
                                     "FOWNER DAC_OVERRIDE KILL)"));
  const HostFeature& seccomp = feature(features, "seccomp profile");
  EXPECT_TRUE(seccomp.present) << seccomp.detail;
  EXPECT_EQ(seccomp.detail, "this process is not filtered (Seccomp: 0)");
  EXPECT_TRUE(feature(features, "user namespace").present);
  EXPECT_THAT(feature(features, "user namespace").detail, HasSubstr("the initial one"));
  EXPECT_FALSE(feature(features, "/proc unmasked").required);  // host users
}

TEST(PodNeeds, ARuntimeProfileThatRefusesPivotRootIsNamed) {
  // A child under a filter like Docker's default (pivot_root EPERM, clone3 ENOSYS).
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(pivot_root), 0) != 0 ||
        seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) != 0 ||
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(ctx) != 0)
      ::_exit(2);
    const HostFeature f = feature(probe_pod_needs(true), "seccomp profile");
    const std::string line = (f.present ? "present " : "missing ") + f.detail;
    if (::write(fds[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) ::_exit(3);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_THAT(text, HasSubstr("missing this process is filtered (Seccomp: 2)"));
  EXPECT_THAT(text, HasSubstr("it refuses pivot_root: EPERM, clone3: ENOSYS"));
  EXPECT_THAT(text, testing::Not(HasSubstr("mount_setattr")));  // let through
}

TEST(PodNeeds, AnOrdinaryUserIsNotAskedForCapabilities) {
  const auto features = probe_pod_needs(/*as_root=*/false);
  for (const auto& f : features) EXPECT_NE(f.name, "capabilities");
  // `run` as an ordinary user makes a user namespace, where a box's /proc needs no masks.
  EXPECT_TRUE(feature(features, "/proc unmasked").required);
}

}  // namespace
}  // namespace agentbox
