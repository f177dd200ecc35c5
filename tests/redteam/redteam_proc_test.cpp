// Red team, processes and privileges: a box neither sees nor signals nor traces processes
// outside it (another box's, the host's), cannot read secrets from /proc environ files, holds no
// capability, cannot gain any through a setuid binary, and leaves no core dumps.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "redteam/probe_runner.hpp"

namespace agentbox::redteam {
namespace {

// A box holding `sleep 30`, and the sleep's host pid (agentbox → agentbox-init → sleep).
struct SleepingBox {
  BoxHome home;
  Background agentbox{home.box().argv({"/bin/sleep", "30"})};
  pid_t sleep_pid = descendant_of(agentbox.pid(), 2).value_or(-1);
};

TEST(RedteamProc, AnotherBoxsProcessesCannotBeSeenOrSignalled) {
  SleepingBox b;
  ASSERT_GT(b.sleep_pid, 0) << "box B's sleep did not appear under agentbox pid " << b.agentbox.pid();
  const std::string target = std::to_string(b.sleep_pid);

  BoxHome home_a;
  BoxRun a = home_a.box();
  EXPECT_TRUE(Blocked(a.probe({"see-pid", target}), "pid not visible"));
  EXPECT_TRUE(Blocked(a.probe({"signal-pid", target}), "ESRCH"));
  // Nor B's agentbox, nor the test process that started A (the host side of A itself).
  EXPECT_TRUE(Blocked(a.probe({"see-pid", std::to_string(b.agentbox.pid())}), "pid not visible"));
  EXPECT_TRUE(Blocked(a.probe({"signal-pid", std::to_string(::getpid())}), "ESRCH"));

  // Control: from the host the same pid is visible and takes a (harmless) SIGCONT.
  EXPECT_TRUE(Allowed(probe_outside({"see-pid", target})));
  EXPECT_TRUE(Allowed(probe_outside({"signal-pid", target})));
  EXPECT_TRUE(b.agentbox.running());
}

TEST(RedteamProc, EnvironOfInitAndOfHostProcessesIsUnreadable) {
  // A host process the test owns, and a box whose agentbox (a host process) has a known pid.
  Background host_sleep({"/bin/sleep", "30"});
  SleepingBox b;
  ASSERT_GT(b.sleep_pid, 0);
  const std::string host_environ = "/proc/" + std::to_string(host_sleep.pid()) + "/environ";
  const std::string agentbox_environ = "/proc/" + std::to_string(b.agentbox.pid()) + "/environ";

  BoxHome home;
  BoxRun box = home.box();
  // The box's init is non-dumpable (it set up the box as root): its environ is closed to the
  // box user even though init runs as the same uid now.
  EXPECT_TRUE(Blocked(box.probe({"read-file", "/proc/1/environ"}), "EACCES"));
  // Host processes are not in the box's pid namespace at all.
  EXPECT_TRUE(Blocked(box.probe({"read-file", host_environ}), "ENOENT"));
  EXPECT_TRUE(Blocked(box.probe({"read-file", agentbox_environ}), "ENOENT"));
  // Control inside: its own environ is readable (the refusal is about whose, not /proc).
  EXPECT_TRUE(Allowed(box.probe({"read-file", "/proc/self/environ"})));

  // Control outside: root reads both host processes' environ files.
  EXPECT_TRUE(Allowed(probe_outside({"read-file", host_environ})));
  EXPECT_TRUE(Allowed(probe_outside({"read-file", agentbox_environ})));
}

// Whether needle is anywhere in the readable memory of pid (as root, through /proc/PID/mem),
// read 1 MiB at a time. Mappings over 1 GiB are reservations (a sanitizer's shadow), not data.
bool memory_holds(pid_t pid, const std::string& needle) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  UniqueFd mem(::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (!maps || !mem) throw sys_error("open /proc/" + std::to_string(pid) + "/{maps,mem}");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &start, &end, perms) != 3 || perms[0] != 'r') continue;
    if (line.find("[vsyscall]") != std::string::npos || end - start > (1ul << 30)) continue;
    constexpr unsigned long kChunk = 1 << 20;
    std::string data(kChunk + needle.size(), '\0');
    for (unsigned long at = start; at < end; at += kChunk) {  // chunks overlap by needle's length
      const size_t want = std::min<unsigned long>(end - at, kChunk + needle.size());
      const ssize_t n = ::pread(mem.get(), data.data(), want, static_cast<off_t>(at));
      if (n > 0 && std::string_view(data.data(), static_cast<size_t>(n)).find(needle) != std::string_view::npos)
        return true;
    }
  }
  return false;
}

// The caller's environment may hold secrets the box must not get: beyond the variables chosen
// for the box, nothing of it may be in the memory of the box's init (where a flaw in init could
// leak it) or of the command. The shipped `agentbox run` makes init a copy of itself, which wipes
// the caller's environment (box/init/init_in_place.hpp; tests/redteam/test_run_init_memory.py
// checks that build); this build is a sanitizer's, whose runtime keeps a copy of the environment
// of its own, so its `run` execs init, and this test checks that way.
// Control: the same scan finds the secret in agentbox itself.
TEST(RedteamProc, InitsMemoryHoldsNoneOfTheCallersEnvironment) {
  const std::string secret = "abx-caller-secret-" + std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr));
  ::setenv("ABX_CALLER_SECRET", secret.c_str(), 1);
  SleepingBox b;
  ::unsetenv("ABX_CALLER_SECRET");
  ASSERT_GT(b.sleep_pid, 0);
  const pid_t init = descendant_of(b.agentbox.pid(), 1).value_or(-1);
  ASSERT_GT(init, 0);
  EXPECT_FALSE(memory_holds(init, secret)) << "the caller's environment is in the box's init";
  EXPECT_FALSE(memory_holds(b.sleep_pid, secret)) << "the caller's environment reached the command";
  EXPECT_TRUE(memory_holds(b.agentbox.pid(), secret));
}

// init's sockets to the daemon (control on fd 3, events on fd 4: box/protocol.hpp) must stay
// init's. A command holding them can forge init's messages to the daemon, which runs as root
// and believes them (exit statuses, spawn replies), and can read requests meant for init.
TEST(RedteamProc, DaemonSocketsDoNotLeakIntoBoxCommands) {
  BoxHome home;
  BoxRun box = home.box();
  // No pipeline: while the shell builds one it holds the pipe's ends itself, and `ls` would see
  // them. `; true` keeps the shell from exec'ing ls, whose own directory descriptor would show.
  const RunResult fds = box.command({"/bin/sh", "-c", "ls -1 /proc/$$/fd; true"});
  ASSERT_EQ(fds.exit_code, 0) << fds.describe();
  EXPECT_EQ(fds.out, "0\n1\n2\n") << "the descriptors a box command starts with";

  // The attack the leak allows: the command reports its own exit with status 0 on the event
  // socket, then exits 7. agentbox run must report 7, the command's real exit code.
  const std::string forge = "/usr/bin/printf '{\"t\":\"exit\",\"pid\":%d,\"status\":0}' $$ >&4 2>/dev/null; exit 7";
  const RunResult forged = box.command({"/bin/sh", "-c", forge});
  EXPECT_EQ(forged.exit_code, 7) << "agentbox run believed an exit event a box process forged: " << forged.describe();
}

TEST(RedteamProc, PtraceIsRefused) {
  BoxHome home;
  BoxRun box = home.box();
  EXPECT_TRUE(Blocked(box.probe({"ptrace-traceme"}), "EPERM"));
  // A sibling in the same box, same uid: only seccomp stands between them.
  const std::string script = "/bin/sleep 10 & /probe/abx-probe ptrace-pid $!; rc=$?; kill $!; exit $rc";
  ProbeResult sibling = to_probe_result(box.command({"/bin/sh", "-c", script}), "inside a box (sibling)");
  EXPECT_TRUE(Blocked(sibling, "EPERM"));

  // Controls outside: root may trace itself and a process the test started.
  EXPECT_TRUE(Allowed(probe_outside({"ptrace-traceme"})));
  Background target({"/bin/sleep", "30"});
  EXPECT_TRUE(Allowed(probe_outside({"ptrace-pid", std::to_string(target.pid())})));
}

TEST(RedteamProc, BoxHoldsNoCapabilitiesAndNoNewPrivsIsSet) {
  BoxHome home;
  BoxRun box = home.box();
  EXPECT_TRUE(Blocked(box.probe({"caps"}), "all capability sets empty"));
  EXPECT_TRUE(Blocked(box.probe({"no-new-privs"}), "no_new_privs is 1"));
  // Controls: root outside holds capabilities, and a plain process has no_new_privs clear.
  EXPECT_TRUE(Allowed(probe_outside({"caps"})));
  EXPECT_TRUE(Allowed(probe_outside({"no-new-privs"})));
}

// A setuid-root copy of the probe, bound into the box: exec must not make it euid 0.
TEST(RedteamProc, SetuidBinaryGainsNothing) {
  TempDir suid_dir("suid");
  const std::string copy = suid_dir / "abx-probe-suid";
  std::filesystem::copy_file(probe_path(), copy);
  ASSERT_EQ(::chown(copy.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(copy.c_str(), 04755), 0);
  ASSERT_EQ(::chmod(suid_dir.path().c_str(), 0755), 0);  // nobody must reach it for the control

  BoxHome home;
  BoxRun box = home.box();
  box.ro_bind(suid_dir.path(), "/probe2");
  EXPECT_TRUE(Blocked(box.probe({"setuid-gain", "/probe2/abx-probe-suid"}), "euid stayed"));
  // Control: outside, nobody running the same copy becomes euid 0.
  EXPECT_TRUE(Allowed(probe_outside({"setuid-gain", copy}, {.uid = kNobody})));
}

// RLIMIT_CORE is 0 soft and hard in a box: a crashing process cannot leave its memory in a file.
TEST(RedteamProc, CoreDumpsAreNotWritten) {
  BoxHome home;
  EXPECT_TRUE(Blocked(home.box().probe({"core-dump", kBoxHome}), "no core dump"));
  // Control: outside, with RLIMIT_CORE raised, the same abort leaves a core (core_pattern
  // "core" on our machines; the probe removes the file again).
  TempDir dump_dir("core");
  EXPECT_TRUE(Allowed(probe_outside({"core-dump", dump_dir.path()}, {.core_limit = RLIM_INFINITY})));
}

// /proc files that show the whole host (its boot command line, interrupts, kernel modules and
// symbols, timers, every block device with its I/O counters) read empty in a box: /dev/null is
// bound over them. Control: as root outside the same files hold data, so "empty" is the mask's
// doing.
TEST(RedteamProcMasks, HostWideProcFilesReadEmptyInsideAndHoldDataOutside) {
  BoxHome home;
  BoxRun box = home.box();
  int controls = 0;
  for (const char* path : {"/proc/cmdline", "/proc/interrupts", "/proc/modules", "/proc/kallsyms", "/proc/timer_list",
                           "/proc/keys", "/proc/config.gz", "/proc/latency_stats", "/proc/sched_debug", "/proc/kcore",
                           "/proc/diskstats", "/proc/partitions"}) {
    const ProbeResult outside = probe_outside({"read-content", path});
    if (outside.run.exit_code != 0) continue;  // nothing there on this kernel, nothing to hide
    ++controls;
    EXPECT_TRUE(Allowed(outside));
    EXPECT_TRUE(Blocked(box.probe({"read-content", path}), "empty")) << path;
  }
  EXPECT_GE(controls, 3) << "fewer than three host-wide /proc files hold data here: the test shows little";
}

// Directories of the host's hardware (/proc/bus, /proc/irq, /proc/fs, /proc/acpi, /proc/scsi)
// are empty in a box; /proc/sys is read-only. Controls: outside they list entries, and a box's
// /proc/self is as full as ever.
TEST(RedteamProcMasks, HardwareDirectoriesAreEmptyAndProcSysReadOnly) {
  BoxHome home;
  BoxRun box = home.box();
  int controls = 0;
  for (const char* dir : {"/proc/bus", "/proc/irq", "/proc/fs", "/proc/acpi", "/proc/scsi"}) {
    const ProbeResult outside = probe_outside({"list-dir", dir});
    if (outside.run.exit_code != 0) continue;
    ++controls;
    EXPECT_TRUE(Allowed(outside));
    const ProbeResult inside = box.probe({"list-dir", dir});
    EXPECT_TRUE(Allowed(inside));
    EXPECT_TRUE(inside.line.starts_with("ALLOWED: listed 0 entries")) << dir << ": " << inside.line;
  }
  EXPECT_GE(controls, 2);
  const ProbeResult self = box.probe({"list-dir", "/proc/self"});
  EXPECT_TRUE(Allowed(self));
  EXPECT_FALSE(self.line.starts_with("ALLOWED: listed 0 entries")) << self.line;
  // A file the box's own (uts) namespace would let root write: read-only for anyone here.
  EXPECT_TRUE(Blocked(box.probe({"write-file", "/proc/sys/kernel/hostname"}), "EROFS"));
}

// The host's /etc/environment is where administrators put proxy credentials and tokens for every
// login. A secret planted there is nowhere in a box's /etc or /proc. Control: outside, the same
// search finds it in /etc.
TEST(RedteamProcMasks, APlantedSecretInTheHostsEtcIsNowhereInABox) {
  const std::string path = "/etc/environment";
  std::string original;
  {
    std::ifstream in(path);
    original.assign(std::istreambuf_iterator<char>(in), {});
  }
  struct Restore {
    std::string path, text;
    ~Restore() { std::ofstream(path, std::ios::trunc) << text; }
  } restore{path, original};
  const std::string secret = "AGENTBOX_PLANTED_" + std::to_string(::getpid()) + "_" + std::to_string(::time(nullptr));
  std::ofstream(path, std::ios::app) << "HTTPS_PROXY=http://user:" << secret << "@proxy.invalid:3128\n";

  std::string hex;
  for (unsigned char c : secret) hex += fmt::format("{:02x}", c);
  BoxHome home;
  EXPECT_TRUE(Blocked(home.box().probe({"find-text", hex, "/etc", "/proc"}), "not found"));
  EXPECT_TRUE(Allowed(probe_outside({"find-text", hex, "/etc"})));
}

}  // namespace
}  // namespace agentbox::redteam
