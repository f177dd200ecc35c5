// The box's seccomp filter, probed for real: each probe runs in a fresh forked child, once under
// the filter and once without it (the control), so every refusal is shown to be the filter's
// and everything a box needs (fork, threads, posix_spawn, ttys, routing netlink) keeps working.
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <set>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "box/contain/seccomp.hpp"
#include "util/error.hpp"

extern char** environ;

namespace {

namespace sf = agentbox::seccomp_filter;

constexpr const char* kMissingPath = "/nonexistent-agentbox-seccomp-probe";
constexpr int kUnexpected = 10000;  // a probe saw a result that is neither success nor errno

// ---- how a probe child ended ------------------------------------------------------------

std::string errno_name(int e) {
  const char* name = strerrorname_np(e);
  return name ? name : std::to_string(e);
}

struct Outcome {
  enum Kind { returned, killed, broken } kind = broken;
  int value = 0;  // returned: 0 or the errno; killed: the signal
};

std::string describe(const Outcome& o) {
  switch (o.kind) {
    case Outcome::returned: return o.value == 0 ? "success" : "errno " + errno_name(o.value);
    case Outcome::killed: return "killed by signal " + std::to_string(o.value);
    case Outcome::broken: return "harness failure in child (exit " + std::to_string(o.value) + ")";
  }
  return "?";
}

struct Expect {
  enum Kind { ok, fails_with, killed_by, returns, not_eperm } kind;
  int value = 0;

  bool matches(const Outcome& o) const {
    switch (kind) {
      case ok: return o.kind == Outcome::returned && o.value == 0;
      case fails_with: return o.kind == Outcome::returned && o.value == value;
      case killed_by: return o.kind == Outcome::killed && o.value == value;
      case returns: return o.kind == Outcome::returned;
      case not_eperm: return o.kind == Outcome::returned && o.value != EPERM;
    }
    return false;
  }
  std::string text() const {
    switch (kind) {
      case ok: return "success";
      case fails_with: return "errno " + errno_name(value);
      case killed_by: return "killed by signal " + std::to_string(value);
      case returns: return "a normal return (any result)";
      case not_eperm: return "any answer but EPERM";
    }
    return "?";
  }
};
constexpr Expect Ok{Expect::ok};
constexpr Expect Fails(int e) { return {Expect::fails_with, e}; }
constexpr Expect Killed(int sig) { return {Expect::killed_by, sig}; }
constexpr Expect Returns{Expect::returns};
constexpr Expect NotEperm{Expect::not_eperm};  // any answer but EPERM (the kernel's, not a filter's)

// Runs probe in a forked child, under the filter when `filtered`, and reports how it ended.
Outcome run_probe(int (*probe)(), bool filtered) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    if (filtered) {
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(100);
      try {
        sf::apply_in_child();
      } catch (const std::exception& e) {
        (void)!write(2, e.what(), strlen(e.what()));
        _exit(101);
      }
    }
    // Let the kernel's verdict show: sanitizers would turn a fault into a plain exit.
    signal(SIGSEGV, SIG_DFL);
    const int result = probe();
    _exit(write(p[1], &result, sizeof result) == sizeof result ? 0 : 102);
  }
  close(p[1]);
  int result = 0;
  const ssize_t n = pid > 0 ? read(p[0], &result, sizeof result) : -1;
  close(p[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return {};
  if (WIFSIGNALED(status)) return {Outcome::killed, WTERMSIG(status)};
  if (n != sizeof result || WEXITSTATUS(status) != 0) return {Outcome::broken, WEXITSTATUS(status)};
  return {Outcome::returned, result};
}

// ---- probes: each returns 0 when the call worked, else its errno ------------------------

int err_of(long rc) { return rc == -1 ? errno : 0; }
int fd_result(long fd) {
  if (fd < 0) return errno;
  close(static_cast<int>(fd));
  return 0;
}
int reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return errno;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : kUnexpected;
}

// Raw clone without a new stack behaves like fork: the child runs on its copy of our stack.
template <unsigned long Flags>
int clone_with() {
  const long pid = syscall(SYS_clone, Flags | SIGCHLD, nullptr, nullptr, nullptr, 0);
  if (pid == 0) _exit(0);
  if (pid < 0) return errno;
  return reap(static_cast<pid_t>(pid));
}

// struct clone_args, version 0 (64 bytes); <linux/sched.h> clashes with glibc's <sched.h>.
struct CloneArgs {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};
template <unsigned long Flags>
int clone3_with() {
  CloneArgs args{};
  args.flags = Flags;
  args.exit_signal = SIGCHLD;
  const long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) _exit(0);
  if (pid < 0) return errno;
  return reap(static_cast<pid_t>(pid));
}

int fork_works() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  if (pid < 0) return errno;
  return reap(pid);
}

int thread_works() {
  try {
    std::atomic<bool> ran{false};
    std::thread t([&] { ran = true; });
    t.join();
    return ran ? 0 : kUnexpected;
  } catch (const std::system_error& e) {
    return e.code().value();
  }
}

int posix_spawn_works() {
  pid_t pid = 0;
  char* argv[] = {const_cast<char*>("true"), nullptr};
  const int rc = posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ);
  return rc != 0 ? rc : reap(pid);
}

int unshare_user() { return err_of(unshare(CLONE_NEWUSER)); }
int mount_tmpfs() { return err_of(mount(nullptr, kMissingPath, "tmpfs", 0, nullptr)); }
int fsopen_tmpfs() { return fd_result(syscall(SYS_fsopen, "tmpfs", 0x1 /* FSOPEN_CLOEXEC */)); }
int open_tree_attr_missing() {  // 467 since 6.15, newer than our libseccomp
  return fd_result(syscall(467, AT_FDCWD, kMissingPath, 0, nullptr, 0));
}
int setns_bad_fd() { return err_of(syscall(SYS_setns, -1, 0)); }

int bpf_map_create() {
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = 4;
  attr.max_entries = 1;
  return fd_result(syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr));
}

int perf_event_open_self() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  return fd_result(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

int ptrace_traceme() { return err_of(syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0)); }

int process_vm_readv_self() {
  char src[8] = "secret", dst[8] = {};
  iovec local{dst, sizeof dst}, remote{src, sizeof src};
  return err_of(process_vm_readv(getpid(), &local, 1, &remote, 1, 0));
}

int keyctl_session() { return err_of(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)); }
int userfaultfd_open() { return fd_result(syscall(SYS_userfaultfd, O_CLOEXEC)); }
int io_uring_setup_small() {
  io_uring_params params{};
  return fd_result(syscall(SYS_io_uring_setup, 4, &params));
}

// A pty of our own: root may push input into it (TIOCSTI needs CAP_SYS_ADMIN otherwise).
template <unsigned long Request, bool HighBits>
int pty_ioctl() {
  const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return kUnexpected;
  const int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) return kUnexpected;
  // The kernel reads the request as an unsigned int; the high half must not dodge the rule.
  const unsigned long request = HighBits ? (Request | 0xffffffff00000000ul) : Request;
  char arg[64] = {'x'};  // TIOCSTI: the byte; TIOCLINUX: subcode 0; TIOCGWINSZ: a winsize
  const int result = err_of(syscall(SYS_ioctl, slave, request, arg));
  close(slave);
  close(master);
  return result;
}

template <int Family, int Type, int Protocol>
int socket_of() {
  return fd_result(socket(Family, Type | SOCK_CLOEXEC, Protocol));
}
int socket_packet_high_bits() {  // the kernel reads the family as an int
  return fd_result(syscall(SYS_socket, AF_PACKET | (1ul << 32), SOCK_RAW, 0));
}

int tiocsetd_with(unsigned long request) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return kUnexpected;
  const int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) return kUnexpected;
  int discipline = N_TTY;  // the one it has: a change of nothing
  const int result = err_of(syscall(SYS_ioctl, slave, request, &discipline));
  close(slave);
  close(master);
  return result;
}
int tiocsetd_n_tty() { return tiocsetd_with(TIOCSETD); }
int tiocsetd_n_tty_high_bits() { return tiocsetd_with(TIOCSETD | 0xffffffff00000000ul); }

int inet_tcp_protocol_high_bits() {  // the protocol compare covers all 64 bits: fails closed
  return fd_result(syscall(SYS_socket, AF_INET, SOCK_STREAM, IPPROTO_TCP | (1ul << 32)));
}

template <int Family>
int socketpair_of() {
  int sv[2];
  if (socketpair(Family, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return errno;
  close(sv[0]);
  close(sv[1]);
  return 0;
}

int mbind_default() {
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return kUnexpected;
  const int result = err_of(syscall(SYS_mbind, page, 4096, 0 /* MPOL_DEFAULT */, nullptr, 0, 0));
  munmap(page, 4096);
  return result;
}

int listmount_junk() { return err_of(syscall(458, nullptr, nullptr, 0, 0)); }  // 6.8

template <unsigned long Persona>
int personality_set() {
  return err_of(syscall(SYS_personality, Persona));
}

#if defined(__x86_64__)
int int80_getpid() {  // the i386 entry point: getpid is 20 there
  long ret = 20;
  asm volatile("int $0x80" : "+a"(ret) : : "memory", "cc", "r8", "r9", "r10", "r11");
  return ret == getpid() ? 0 : kUnexpected;
}
int x32_getpid() {  // x32 numbers are the x86_64 ones with bit 30 set
  return err_of(syscall(0x40000000 | SYS_getpid));
}
#endif

// ---- the probe table --------------------------------------------------------------------

struct Probe {
  const char* name;
  int (*run)();
  Expect filtered;
  Expect unfiltered;  // the control
};

const Probe kProbes[] = {
    // Namespaces: refused under the filter, possible for root without it.
    {"unshare_user", unshare_user, Fails(EPERM), Ok},
    {"clone_newns", clone_with<CLONE_NEWNS>, Fails(EPERM), Ok},
    {"clone_newuser", clone_with<CLONE_NEWUSER>, Fails(EPERM), Ok},
    {"clone_newpid", clone_with<CLONE_NEWPID>, Fails(EPERM), Ok},
    {"clone_newnet", clone_with<CLONE_NEWNET>, Fails(EPERM), Ok},
    {"clone_newipc", clone_with<CLONE_NEWIPC>, Fails(EPERM), Ok},
    {"clone_newuts", clone_with<CLONE_NEWUTS>, Fails(EPERM), Ok},
    {"clone_newcgroup", clone_with<CLONE_NEWCGROUP>, Fails(EPERM), Ok},
    {"clone3_plain", clone3_with<0>, Fails(ENOSYS), Ok},
    {"clone3_newuser", clone3_with<CLONE_NEWUSER>, Fails(ENOSYS), Ok},
    {"setns", setns_bad_fd, Fails(EPERM), Fails(EBADF)},
    // What programs do all the time keeps working (glibc falls back from clone3 to clone).
    {"plain_clone", clone_with<0>, Ok, Ok},
    {"fork", fork_works, Ok, Ok},
    {"thread", thread_works, Ok, Ok},
    {"posix_spawn", posix_spawn_works, Ok, Ok},
    // Mounts.
    {"mount", mount_tmpfs, Fails(EPERM), Fails(ENOENT)},
    {"fsopen", fsopen_tmpfs, Fails(EPERM), Ok},
    {"open_tree_attr", open_tree_attr_missing, Fails(EPERM), Fails(ENOENT)},
    // Kernel surface and other processes.
    {"bpf", bpf_map_create, Fails(EPERM), Ok},
    {"perf_event_open", perf_event_open_self, Fails(EPERM), Ok},
    {"ptrace_traceme", ptrace_traceme, Fails(EPERM), Ok},
    {"process_vm_readv", process_vm_readv_self, Fails(EPERM), Ok},
    {"keyctl", keyctl_session, Fails(EPERM), Ok},
    {"userfaultfd", userfaultfd_open, Fails(EPERM), Ok},
    {"io_uring_setup", io_uring_setup_small, Fails(EPERM), Ok},
    // Terminal injection, also with the request's high half set; other tty ioctls work.
    {"tiocsti", pty_ioctl<TIOCSTI, false>, Fails(EPERM), Ok},
    {"tiocsti_high_bits", pty_ioctl<TIOCSTI, true>, Fails(EPERM), Ok},
    {"tioclinux", pty_ioctl<TIOCLINUX, false>, Fails(EPERM), Fails(ENOTTY)},
    {"tiocgwinsz", pty_ioctl<TIOCGWINSZ, false>, Ok, Ok},
    {"tiocsetd", tiocsetd_n_tty, Fails(EPERM), Ok},
    {"tiocsetd_high_bits", tiocsetd_n_tty_high_bits, Fails(EPERM), Ok},
    // Socket families.
    {"af_packet", socket_of<AF_PACKET, SOCK_RAW, 0>, Fails(EPERM), Ok},
    {"af_packet_high_bits", socket_packet_high_bits, Fails(EPERM), Ok},
    {"af_inet_sock_packet", socket_of<AF_INET, SOCK_PACKET, 0>, Fails(EPERM), Ok},
    {"af_vsock", socket_of<AF_VSOCK, SOCK_STREAM, 0>, Fails(EPERM), Ok},
    {"netlink_route", socket_of<AF_NETLINK, SOCK_RAW, NETLINK_ROUTE>, Ok, Ok},
    {"netlink_route_dgram", socket_of<AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE>, Ok, Ok},
    {"netlink_audit", socket_of<AF_NETLINK, SOCK_RAW, NETLINK_AUDIT>, Fails(EPERM), Ok},
    {"inet_raw", socket_of<AF_INET, SOCK_RAW | SOCK_NONBLOCK, IPPROTO_ICMP>, Fails(EPERM), Ok},
    {"inet6_raw", socket_of<AF_INET6, SOCK_RAW, IPPROTO_ICMPV6>, Fails(EPERM), Ok},
    {"inet_stream", socket_of<AF_INET, SOCK_STREAM, 0>, Ok, Ok},
    {"inet6_dgram", socket_of<AF_INET6, SOCK_DGRAM, 0>, Ok, Ok},
    {"unix_stream", socket_of<AF_UNIX, SOCK_STREAM, 0>, Ok, Ok},
    {"inet_tcp", socket_of<AF_INET, SOCK_STREAM | SOCK_NONBLOCK, IPPROTO_TCP>, Ok, Ok},
    {"inet6_udp", socket_of<AF_INET6, SOCK_DGRAM, IPPROTO_UDP>, Ok, Ok},
    {"inet_sctp", socket_of<AF_INET, SOCK_STREAM, IPPROTO_SCTP>, Fails(EPERM), NotEperm},
    {"inet_udplite", socket_of<AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE>, Fails(EPERM), NotEperm},
    {"inet_tcp_protocol_high_bits", inet_tcp_protocol_high_bits, Fails(EPERM), Ok},
    {"af_appletalk", socket_of<AF_APPLETALK, SOCK_DGRAM, 0>, Fails(EPERM), NotEperm},
    {"socketpair_unix", socketpair_of<AF_UNIX>, Ok, Ok},
    {"socketpair_inet", socketpair_of<AF_INET>, Fails(EPERM), NotEperm},
    // NUMA placement and mount listing: off the list.
    {"mbind", mbind_default, Fails(EPERM), Ok},
    {"listmount", listmount_junk, Fails(EPERM), NotEperm},
    // personality: Docker's values pass, the ones that weaken memory protections do not.
    {"personality_linux", personality_set<PER_LINUX>, Ok, Ok},
    {"personality_linux32", personality_set<PER_LINUX32>, Ok, Ok},
    {"personality_uname26", personality_set<0x20008 /* UNAME26 | PER_LINUX32 */>, Ok, Ok},
    {"personality_query", personality_set<0xffffffff>, Ok, Ok},
    {"personality_read_implies_exec", personality_set<READ_IMPLIES_EXEC>, Fails(EPERM), Ok},
    {"personality_no_randomize", personality_set<ADDR_NO_RANDOMIZE>, Fails(EPERM), Ok},
    {"personality_all_but_one_bit", personality_set<0xfffffffe>, Fails(EPERM), Ok},
    {"personality_high_bits", personality_set<0x100000000 | READ_IMPLIES_EXEC>, Fails(EPERM), Ok},
#if defined(__x86_64__)
    // x32 numbers go to the bad-architecture action, whether or not the kernel has x32 (this
    // one does not: ENOSYS without the filter). i386 has its own test below.
    {"x32", x32_getpid, Killed(SIGSYS), Returns},
#endif
};

void PrintTo(const Probe& p, std::ostream* os) { *os << p.name; }

class SeccompProbe : public ::testing::TestWithParam<Probe> {};

TEST_P(SeccompProbe, FilterDecidesTheOutcome) {
  const Probe& p = GetParam();
  const Outcome control = run_probe(p.run, false);
  EXPECT_TRUE(p.unfiltered.matches(control))
      << p.name << " without the filter: expected " << p.unfiltered.text() << ", got " << describe(control);
  const Outcome filtered = run_probe(p.run, true);
  EXPECT_TRUE(p.filtered.matches(filtered))
      << p.name << " under the filter: expected " << p.filtered.text() << ", got " << describe(filtered);
}

INSTANTIATE_TEST_SUITE_P(Probes, SeccompProbe, ::testing::ValuesIn(kProbes),
                         [](const ::testing::TestParamInfo<Probe>& info) { return std::string(info.param.name); });

// Runs `body` in a forked child under the filter; returns what it wrote (a report of failures).
std::string report_under_filter(const std::function<std::string()>& body) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return "pipe2 failed";
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(p[0]);
    setsid();  // no controlling terminal: vhangup has nothing to hang up
    std::string report;
    try {
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw std::runtime_error("no_new_privs");
      sf::apply_in_child();
      report = body();
    } catch (const std::exception& e) {
      report = std::string("exception: ") + e.what();
    }
    (void)!write(p[1], report.data(), report.size());
    _exit(0);
  }
  close(p[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return "waitpid failed";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) report += "child status " + std::to_string(status);
  return report;
}

// Every call refused on purpose, and every number from 0 to 470 on neither list, answers the
// filter's EPERM when called with junk arguments (which keep the calls harmless should one ever
// slip through). The kernel's passthrough numbers (uprobes) are left out: no filter sees them.
TEST(SeccompFilter, EverythingOffTheListsAnswersEperm) {
  const std::vector<int> listed = sf::listed_numbers();
  for (const sf::ListedSyscall& call : sf::refused_syscalls()) {
    const int nr = sf::native_number(call);
    EXPECT_FALSE(nr >= 0 && std::binary_search(listed.begin(), listed.end(), nr))
        << call.name << " is refused on purpose and listed as allowed";
  }
  const std::string report = report_under_filter([&] {
    std::string failures;
    for (long nr = 0; nr <= 470; ++nr) {
      if (std::binary_search(listed.begin(), listed.end(), nr)) continue;
      if (std::ranges::find(sf::kernel_passthrough_numbers(), nr) != sf::kernel_passthrough_numbers().end()) continue;
      const long rc = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L);
      if (rc != -1 || errno != EPERM)
        failures += std::to_string(nr) + " -> " + (rc == -1 ? errno_name(errno) : "success") + "; ";
    }
    return failures;
  });
  EXPECT_EQ(report, "");
}

// Each allowed call goes past the filter: called with junk arguments under the filter, it gets
// the kernel's answer (EBADF, EFAULT, EINVAL...), not the filter's EPERM. Calls whose junk call
// would act on the test itself (exit, pause, kill -1, fork...) are left out.
TEST(SeccompFilter, AllowedCallsAreNotTheFiltersToRefuse) {
  const std::set<std::string> acts_on_the_caller = {"exit",
                                                    "exit_group",
                                                    "pause",
                                                    "rt_sigsuspend",
                                                    "rt_sigreturn",
                                                    "fork",
                                                    "vfork",
                                                    "kill",
                                                    "tkill",
                                                    "tgkill",
                                                    "setsid",
                                                    "setpgid",
                                                    "munmap",
                                                    "brk",
                                                    "mremap",
                                                    "mprotect",
                                                    "madvise",
                                                    "mlockall",
                                                    "munlockall",
                                                    "setrlimit",
                                                    "prlimit64",
                                                    "rt_sigprocmask",
                                                    "rt_sigaction",
                                                    "sigaltstack",
                                                    "set_tid_address",
                                                    "set_robust_list",
                                                    "rseq",
                                                    "arch_prctl",
                                                    "set_thread_area",
                                                    "prctl",
                                                    "seccomp",
                                                    "landlock_restrict_self",
                                                    "sched_setaffinity",
                                                    "sched_setscheduler",
                                                    "sched_setattr",
                                                    "sched_setparam",
                                                    "setpriority",
                                                    "ioprio_set",
                                                    "close_range",
                                                    "close",
                                                    "dup2",
                                                    "dup3",
                                                    "futex",
                                                    "futex_waitv",
                                                    "futex_wait",
                                                    "nanosleep",
                                                    "clock_nanosleep",
                                                    "select",
                                                    "pselect6",
                                                    "poll",
                                                    "ppoll",
                                                    "epoll_wait",
                                                    "epoll_pwait",
                                                    "epoll_pwait2",
                                                    "wait4",
                                                    "waitid",
                                                    "rt_sigtimedwait",
                                                    "alarm",
                                                    "setitimer",
                                                    "umask",
                                                    "chdir",
                                                    "fchdir",
                                                    "execve",
                                                    "execveat",
                                                    "sync",
                                                    "syncfs",
                                                    "msgget",
                                                    "semget",
                                                    "shmget",
                                                    "mseal",
                                                    "map_shadow_stack",
                                                    "pkey_mprotect",
                                                    "mlock",
                                                    "mlock2",
                                                    "munlock",
                                                    "msync",
                                                    "setuid",
                                                    "setgid",
                                                    "setreuid",
                                                    "setregid",
                                                    "setresuid",
                                                    "setresgid",
                                                    "setgroups",
                                                    "setfsuid",
                                                    "setfsgid",
                                                    "capset",
                                                    "personality",
                                                    "restart_syscall",
                                                    "mmap"};
  const std::string report = report_under_filter([&] {
    std::string failures;
    for (const sf::ListedSyscall& call : sf::allowed_syscalls()) {
      const int nr = sf::native_number(call);
      if (nr < 0 || acts_on_the_caller.contains(call.name)) continue;
      const long rc = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L);
      if (rc == -1 && errno == EPERM) failures += std::string(call.name) + " -> EPERM; ";
    }
    return failures;
  });
  EXPECT_EQ(report, "");
}

#if defined(__x86_64__)
// On x86_64 every call of the lists exists, so none is silently left out of the filter; every
// refusal says why.
TEST(SeccompFilter, EveryListedCallExistsOnX86_64) {
  for (const auto list : {sf::allowed_syscalls(), sf::argument_filtered_syscalls(), sf::refused_syscalls()}) {
    for (const sf::ListedSyscall& call : list) {
      EXPECT_GE(sf::native_number(call), 0) << call.name;
      EXPECT_NE(std::string(call.why), "") << call.name;
    }
  }
}
#endif

#if defined(__x86_64__)
// A 32-bit syscall (int $0x80) never gets a normal result under the filter. Where the kernel
// offers the i386 entry (the control returns our pid), the kill is the filter's SIGSYS; some
// hosts (our CI VMs among them) disable that entry themselves and fault it with SIGSEGV.
TEST(SeccompFilter, I386EntryIsRefused) {
  const Outcome control = run_probe(int80_getpid, false);
  const Outcome filtered = run_probe(int80_getpid, true);
  ASSERT_EQ(filtered.kind, Outcome::killed) << describe(filtered);
  if (Ok.matches(control)) {
    EXPECT_EQ(filtered.value, SIGSYS) << describe(filtered);
  } else {
    EXPECT_EQ(control.kind, Outcome::killed) << "control: " << describe(control);
    std::cout << "note: this kernel refuses int $0x80 itself (" << describe(control)
              << "); the bad-architecture action is covered by the x32 probe\n";
  }
}
#endif

// agentbox-init installs the program generated at build time; it must be, instruction for
// instruction, what libseccomp builds from the rules now, so a stale generated file cannot pass
// (and the probes above, which run under the embedded program, test the rules themselves).
TEST(SeccompFilter, EmbeddedProgramIsWhatTheRulesBuild) {
  const std::vector<sock_filter> built = sf::build_program();
  const std::span<const sock_filter> embedded = sf::embedded_program();
  ASSERT_EQ(embedded.size(), built.size()) << "instructions: embedded vs built from the rules";
  for (size_t i = 0; i < built.size(); ++i) {  // sock_filter has no padding: fields are bytes
    const sock_filter& e = embedded[i];
    const sock_filter& b = built[i];
    ASSERT_TRUE(e.code == b.code && e.jt == b.jt && e.jf == b.jf && e.k == b.k)
        << "first difference at instruction " << i;
  }
}

TEST(SeccompFilter, UnknownNameIsAnError) {
  const sf::ListedSyscall typo{"mount_typo", "x"};
  EXPECT_THROW(sf::native_number(typo), agentbox::Error);
}

// The containment order sets no_new_privs first; without it the filter refuses to load.
TEST(SeccompFilter, RefusesToLoadWithoutNoNewPrivs) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      sf::apply_in_child();
    } catch (const agentbox::Error& e) {
      _exit(e.code() == EPERM ? 0 : 2);
    }
    _exit(1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
