// Red team, resources: a fork bomb stops at the box's pids limit while the host stays
// responsive, and a memory bomb is killed inside its box while other boxes and host processes
// run on. Bombs only ever run under a limit: the box's cgroup, or one this test makes for the
// control. Both use the cgroup v1 layout of our CI machines (see box/cgroup_v1.cpp).
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "redteam/probe_runner.hpp"

namespace agentbox::redteam {
namespace {

// A v1 cgroup of one controller the test owns, removed again (after its processes are gone).
class TestCgroup {
 public:
  TestCgroup(const std::string& controller, const std::string& knob, const std::string& value) {
    path_ = "/sys/fs/cgroup/" + controller + "/abx-rt-" + std::to_string(::getpid());
    check(::mkdir(path_.c_str(), 0755), "mkdir(" + path_ + ")");
    std::ofstream(path_ + "/" + knob) << value;
    std::string written;
    std::ifstream(path_ + "/" + knob) >> written;
    if (written.empty()) throw Error("cgroup knob " + path_ + "/" + knob + " was not set");
  }
  TestCgroup(const TestCgroup&) = delete;
  TestCgroup& operator=(const TestCgroup&) = delete;
  ~TestCgroup() {
    for (int i = 0; i < 100 && ::rmdir(path_.c_str()) != 0 && errno == EBUSY; ++i) std::this_thread::sleep_for(20ms);
  }
  std::string procs() const { return path_ + "/cgroup.procs"; }

 private:
  std::string path_;
};

// The pids.current of the box that `agentbox run` with this pid made (cgroup v1 layout of
// box/cgroup_v1.cpp), or -1 while it does not exist.
long box_pids_current(pid_t agentbox_pid) {
  std::ifstream f("/sys/fs/cgroup/pids/agentbox/run-" + std::to_string(agentbox_pid) + "/pids.current");
  long n = -1;
  f >> n;
  return f ? n : -1;
}

// The memory.kmem.tcp.usage_in_bytes of the box that `agentbox run` with this pid made (cgroup
// v1), or -1 while it does not exist.
long long box_tcp_memory(pid_t agentbox_pid) {
  std::ifstream f("/sys/fs/cgroup/memory/agentbox/run-" + std::to_string(agentbox_pid) +
                  "/memory.kmem.tcp.usage_in_bytes");
  long long n = -1;
  f >> n;
  return f ? n : -1;
}

// Host-side fork+exec+wait of /bin/true, the thing a stuck host could no longer do.
std::chrono::milliseconds time_true() {
  const auto start = Clock::now();
  const RunResult r = run({"/bin/true"}, RunOptions{.timeout = 10s});
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  if (r.exit_code != 0) return 10s;  // a failure counts as unresponsive
  return took;
}

TEST(RedteamLimits, ForkBombStopsAtThePidsLimitAndTheHostStaysResponsive) {
  constexpr int kPidsLimit = 64;
  BoxHome home;
  BoxRun box = home.box();
  box.pids(kPidsLimit);
  // N a little above the limit: the bomb wants 80 processes, the box allows 64 tasks in all.
  Background bomb(box.argv({kProbeInBox, "fork-bomb", "8", "80"}), Background::Output::keep);

  // While the bomb runs, the host keeps forking and executing quickly.
  std::chrono::milliseconds slowest{0};
  long most_in_box = -1;
  int samples_under_pressure = 0;
  const auto deadline = Clock::now() + 20s;
  while (bomb.running() && Clock::now() < deadline) {
    const long in_box = box_pids_current(bomb.pid());
    most_in_box = std::max(most_in_box, in_box);
    slowest = std::max(slowest, time_true());
    if (in_box >= kPidsLimit / 2) ++samples_under_pressure;
  }
  const ProbeResult r = to_probe_result(bomb.collect(5s), "inside a box with --pids 64");
  EXPECT_TRUE(Blocked(r, "EAGAIN"));
  EXPECT_LT(slowest, 1000ms) << "host fork+exec of /bin/true while the bomb ran";
  EXPECT_GT(samples_under_pressure, 0) << "no host measurement while the box held >= 32 tasks (most seen "
                                       << most_in_box << ")";
  EXPECT_LE(most_in_box, kPidsLimit);
  // The probe counts its bomb's processes: never more than the limit.
  long made = -1;
  ASSERT_EQ(std::sscanf(r.line.c_str(), "BLOCKED: EAGAIN after %ld processes", &made), 1) << r.line;
  EXPECT_LE(made, kPidsLimit);

  // Control: the same bomb under a looser limit the test set reaches its 80 processes.
  TestCgroup loose("pids", "pids.max", "200");
  EXPECT_TRUE(Allowed(probe_outside({"fork-bomb", "8", "80"}, {.cgroup_procs = loose.procs()})));
}

TEST(RedteamLimits, MemoryBombIsKilledInsideItsBoxOnly) {
  // Bystanders: a host process and another box, both running through the bomb.
  Background host_sleep({"/bin/sleep", "60"});
  BoxHome bystander_home;
  Background bystander(bystander_home.box().argv({"/bin/sleep", "60"}));
  const std::optional<pid_t> bystander_sleep = descendant_of(bystander.pid(), 2);
  ASSERT_TRUE(bystander_sleep) << "the bystander box's sleep did not start";

  BoxHome home;
  BoxRun box = home.box();
  box.memory("64M");
  const ProbeResult bomb = box.probe({"memory-bomb", "256"});
  EXPECT_TRUE(Blocked(bomb, "child killed by SIGKILL"));
  EXPECT_FALSE(bomb.run.timed_out) << "the bombed box's agentbox run did not exit";

  EXPECT_TRUE(host_sleep.running());
  EXPECT_TRUE(bystander.running());
  EXPECT_EQ(::kill(*bystander_sleep, 0), 0) << "the bystander box's sleep is gone";

  // Controls: a small allocation passes in the same kind of box, and more than the box's limit
  // passes outside under a limit the test made large enough. 96 MiB, not 256: page faults cost
  // about 30 ms per MiB on our CI VMs, and the probe's watchdog gives it 5 s (the box's bomb
  // is stopped at 64 MiB, so it never gets near that).
  EXPECT_TRUE(Allowed(box.probe({"memory-bomb", "16"})));
  TestCgroup roomy("memory", "memory.limit_in_bytes", std::to_string(256ull << 20));
  EXPECT_TRUE(Allowed(probe_outside({"memory-bomb", "96"}, {.cgroup_procs = roomy.procs()})));
}

// Socket buffers come out of the host's one TCP pool (net.ipv4.tcp_mem; past its pressure
// limit every TCP socket on the host stalls). Loopback connections that are written to and never
// read fill both ends' buffers: in a box with --tcp-memory 16M they stop near 16 MiB (the box's
// cgroup charges them, memory.kmem.tcp), where the same program outside goes on to 64 MiB.
TEST(RedteamLimits, UnreadLoopbackConnectionsStopAtTheBoxsTcpMemoryBound) {
  constexpr long long kBound = 16ll << 20;
  constexpr int kConnections = 32;
  // The kernel lets each connection make progress past any bound: one segment into an empty
  // receive queue (up to 64 KiB on loopback) and tcp_wmem[0] sent (4 KiB).
  constexpr long long kPerConnection = 128ll << 10;
  BoxHome home;
  BoxRun box = home.box();
  box.tcp_memory("16M");
  Background filler(box.argv({kProbeInBox, "tcp-buffers", "64", std::to_string(kConnections)}),
                    Background::Output::keep);
  long long most = -1;
  const auto deadline = Clock::now() + 20s;
  while (filler.running() && Clock::now() < deadline) {
    most = std::max(most, box_tcp_memory(filler.pid()));
    std::this_thread::sleep_for(20ms);
  }
  const ProbeResult r = to_probe_result(filler.collect(5s), "inside a box with --tcp-memory 16M");
  EXPECT_TRUE(Blocked(r, "socket buffers stopped taking data"));
  long long queued_kib = -1;
  ASSERT_EQ(std::sscanf(r.line.c_str(), "BLOCKED: socket buffers stopped taking data at %lld KiB", &queued_kib), 1)
      << r.line;
  EXPECT_LE(queued_kib << 10, kBound + kConnections * kPerConnection);
  EXPECT_GT(most, kBound / 2) << "the box's TCP memory was never charged to its cgroup (or never sampled)";
  EXPECT_LE(most, kBound + kConnections * kPerConnection);

  // Control: the same program in a memory cgroup the test made, without a TCP bound, queues
  // all 64 MiB.
  TestCgroup roomy("memory", "memory.limit_in_bytes", std::to_string(1ull << 30));
  EXPECT_TRUE(
      Allowed(probe_outside({"tcp-buffers", "64", std::to_string(kConnections)}, {.cgroup_procs = roomy.procs()})));
}

}  // namespace
}  // namespace agentbox::redteam
