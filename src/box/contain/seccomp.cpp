#include "box/contain/seccomp.hpp"

#include <linux/netlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::seccomp_filter {
namespace {

// Allowed whatever the arguments, by what needs them (Docker's default profile without what it
// allows only to containers holding capabilities a box never has, and without io_uring,
// name_to_handle_at, remap_file_pages and the ptrace family, which it allows by default).
constexpr const char* kFiles = "files and directories";
constexpr const char* kXattrs = "extended attributes";
constexpr const char* kIo = "descriptors, pipes and I/O";
constexpr const char* kPoll = "waiting for events";
constexpr const char* kMemory = "memory";
constexpr const char* kProcesses = "processes and threads";
constexpr const char* kIds = "ids (changing them needs capabilities a box lacks)";
constexpr const char* kSignals = "signals";
constexpr const char* kTime = "time and timers";
constexpr const char* kSockets = "sockets (socket itself is filtered by family)";
constexpr const char* kIpc = "System V and POSIX IPC (the box's own IPC namespace)";
constexpr const char* kScheduling = "scheduling and limits";
constexpr const char* kSandboxing = "sandboxing themselves (browsers, nested tools)";
constexpr const char* kSystem = "system information";

// clang-format off  (a table: one row per line, as written)
constexpr ListedSyscall kAllowed[] = {
    {"open", kFiles},
    {"openat", kFiles},
    {"openat2", kFiles},
    {"creat", kFiles},
    {"close", kFiles},
    {"close_range", kFiles},
    {"stat", kFiles},
    {"fstat", kFiles},
    {"lstat", kFiles},
    {"newfstatat", kFiles},
    {"statx", kFiles},
    {"statfs", kFiles},
    {"fstatfs", kFiles},
    {"access", kFiles},
    {"faccessat", kFiles},
    {"faccessat2", kFiles},
    {"getdents", kFiles},
    {"getdents64", kFiles},
    {"getcwd", kFiles},
    {"chdir", kFiles},
    {"fchdir", kFiles},
    {"rename", kFiles},
    {"renameat", kFiles},
    {"renameat2", kFiles},
    {"mkdir", kFiles},
    {"mkdirat", kFiles},
    {"rmdir", kFiles},
    {"link", kFiles},
    {"linkat", kFiles},
    {"unlink", kFiles},
    {"unlinkat", kFiles},
    {"symlink", kFiles},
    {"symlinkat", kFiles},
    {"readlink", kFiles},
    {"readlinkat", kFiles},
    {"chmod", kFiles},
    {"fchmod", kFiles},
    {"fchmodat", kFiles},
    {"fchmodat2", kFiles},
    {"chown", kFiles},
    {"fchown", kFiles},
    {"lchown", kFiles},
    {"fchownat", kFiles},
    {"umask", kFiles},
    {"utime", kFiles},
    {"utimes", kFiles},
    {"utimensat", kFiles},
    {"futimesat", kFiles},
    {"mknod", kFiles},
    {"mknodat", kFiles},
    {"truncate", kFiles},
    {"ftruncate", kFiles},
    {"fallocate", kFiles},
    {"fadvise64", kFiles},
    {"readahead", kFiles},
    {"flock", kFiles},
    {"fsync", kFiles},
    {"fdatasync", kFiles},
    {"sync", kFiles},
    {"syncfs", kFiles},
    {"sync_file_range", kFiles},
    {"inotify_init", kFiles},
    {"inotify_init1", kFiles},
    {"inotify_add_watch", kFiles},
    {"inotify_rm_watch", kFiles},
    {"cachestat", kFiles},
    {"file_getattr", kFiles},
    {"file_setattr", kFiles},
    {"setxattr", kXattrs},
    {"lsetxattr", kXattrs},
    {"fsetxattr", kXattrs},
    {"setxattrat", kXattrs},
    {"getxattr", kXattrs},
    {"lgetxattr", kXattrs},
    {"fgetxattr", kXattrs},
    {"getxattrat", kXattrs},
    {"listxattr", kXattrs},
    {"llistxattr", kXattrs},
    {"flistxattr", kXattrs},
    {"listxattrat", kXattrs},
    {"removexattr", kXattrs},
    {"lremovexattr", kXattrs},
    {"fremovexattr", kXattrs},
    {"removexattrat", kXattrs},
    {"read", kIo},
    {"write", kIo},
    {"readv", kIo},
    {"writev", kIo},
    {"pread64", kIo},
    {"pwrite64", kIo},
    {"preadv", kIo},
    {"pwritev", kIo},
    {"preadv2", kIo},
    {"pwritev2", kIo},
    {"lseek", kIo},
    {"dup", kIo},
    {"dup2", kIo},
    {"dup3", kIo},
    {"fcntl", kIo},
    {"pipe", kIo},
    {"pipe2", kIo},
    {"sendfile", kIo},
    {"splice", kIo},
    {"tee", kIo},
    {"vmsplice", kIo},
    {"copy_file_range", kIo},
    {"memfd_create", kIo},
    {"eventfd", kIo},
    {"eventfd2", kIo},
    {"io_setup", kIo},
    {"io_destroy", kIo},
    {"io_submit", kIo},
    {"io_cancel", kIo},
    {"io_getevents", kIo},
    {"io_pgetevents", kIo},
    {"poll", kPoll},
    {"ppoll", kPoll},
    {"select", kPoll},
    {"pselect6", kPoll},
    {"epoll_create", kPoll},
    {"epoll_create1", kPoll},
    {"epoll_ctl", kPoll},
    {"epoll_wait", kPoll},
    {"epoll_pwait", kPoll},
    {"epoll_pwait2", kPoll},
    {"futex", kPoll},
    {"futex_waitv", kPoll},
    {"futex_wake", kPoll},
    {"futex_wait", kPoll},
    {"futex_requeue", kPoll},
    {"brk", kMemory},
    {"mmap", kMemory},
    {"munmap", kMemory},
    {"mprotect", kMemory},
    {"mremap", kMemory},
    {"msync", kMemory},
    {"mincore", kMemory},
    {"madvise", kMemory},
    {"mlock", kMemory},
    {"mlock2", kMemory},
    {"munlock", kMemory},
    {"mlockall", kMemory},
    {"munlockall", kMemory},
    {"membarrier", kMemory},
    {"memfd_secret", kMemory},
    {"pkey_alloc", kMemory},
    {"pkey_free", kMemory},
    {"pkey_mprotect", kMemory},
    {"mseal", kMemory},
    {"map_shadow_stack", kMemory},
    {"fork", kProcesses},
    {"vfork", kProcesses},
    {"execve", kProcesses},
    {"execveat", kProcesses},
    {"exit", kProcesses},
    {"exit_group", kProcesses},
    {"wait4", kProcesses},
    {"waitid", kProcesses},
    {"getpid", kProcesses},
    {"getppid", kProcesses},
    {"gettid", kProcesses},
    {"getpgid", kProcesses},
    {"setpgid", kProcesses},
    {"getpgrp", kProcesses},
    {"getsid", kProcesses},
    {"setsid", kProcesses},
    {"set_tid_address", kProcesses},
    {"set_robust_list", kProcesses},
    {"get_robust_list", kProcesses},
    {"rseq", kProcesses},
    {"arch_prctl", kProcesses},
    {"set_thread_area", kProcesses},
    {"get_thread_area", kProcesses},
    {"prctl", kProcesses},
    {"capget", kProcesses},
    {"capset", kProcesses},
    {"pidfd_open", kProcesses},
    {"pidfd_send_signal", kProcesses},
    {"restart_syscall", kProcesses},
    {"getuid", kIds},
    {"geteuid", kIds},
    {"getgid", kIds},
    {"getegid", kIds},
    {"getresuid", kIds},
    {"getresgid", kIds},
    {"getgroups", kIds},
    {"setuid", kIds},
    {"setgid", kIds},
    {"setreuid", kIds},
    {"setregid", kIds},
    {"setresuid", kIds},
    {"setresgid", kIds},
    {"setfsuid", kIds},
    {"setfsgid", kIds},
    {"setgroups", kIds},
    {"kill", kSignals},
    {"tkill", kSignals},
    {"tgkill", kSignals},
    {"rt_sigaction", kSignals},
    {"rt_sigprocmask", kSignals},
    {"rt_sigreturn", kSignals},
    {"rt_sigpending", kSignals},
    {"rt_sigtimedwait", kSignals},
    {"rt_sigqueueinfo", kSignals},
    {"rt_tgsigqueueinfo", kSignals},
    {"rt_sigsuspend", kSignals},
    {"sigaltstack", kSignals},
    {"signalfd", kSignals},
    {"signalfd4", kSignals},
    {"pause", kSignals},
    {"nanosleep", kTime},
    {"clock_nanosleep", kTime},
    {"clock_gettime", kTime},
    {"clock_getres", kTime},
    {"gettimeofday", kTime},
    {"time", kTime},
    {"alarm", kTime},
    {"getitimer", kTime},
    {"setitimer", kTime},
    {"timer_create", kTime},
    {"timer_settime", kTime},
    {"timer_gettime", kTime},
    {"timer_getoverrun", kTime},
    {"timer_delete", kTime},
    {"timerfd_create", kTime},
    {"timerfd_settime", kTime},
    {"timerfd_gettime", kTime},
    {"bind", kSockets},
    {"listen", kSockets},
    {"accept", kSockets},
    {"accept4", kSockets},
    {"connect", kSockets},
    {"getsockname", kSockets},
    {"getpeername", kSockets},
    {"sendto", kSockets},
    {"recvfrom", kSockets},
    {"sendmsg", kSockets},
    {"recvmsg", kSockets},
    {"sendmmsg", kSockets},
    {"recvmmsg", kSockets},
    {"shutdown", kSockets},
    {"setsockopt", kSockets},
    {"getsockopt", kSockets},
    {"shmget", kIpc},
    {"shmat", kIpc},
    {"shmdt", kIpc},
    {"shmctl", kIpc},
    {"semget", kIpc},
    {"semop", kIpc},
    {"semtimedop", kIpc},
    {"semctl", kIpc},
    {"msgget", kIpc},
    {"msgsnd", kIpc},
    {"msgrcv", kIpc},
    {"msgctl", kIpc},
    {"mq_open", kIpc},
    {"mq_unlink", kIpc},
    {"mq_timedsend", kIpc},
    {"mq_timedreceive", kIpc},
    {"mq_notify", kIpc},
    {"mq_getsetattr", kIpc},
    {"getpriority", kScheduling},
    {"setpriority", kScheduling},
    {"sched_yield", kScheduling},
    {"sched_getaffinity", kScheduling},
    {"sched_setaffinity", kScheduling},
    {"sched_getparam", kScheduling},
    {"sched_setparam", kScheduling},
    {"sched_getscheduler", kScheduling},
    {"sched_setscheduler", kScheduling},
    {"sched_getattr", kScheduling},
    {"sched_setattr", kScheduling},
    {"sched_get_priority_max", kScheduling},
    {"sched_get_priority_min", kScheduling},
    {"sched_rr_get_interval", kScheduling},
    {"ioprio_get", kScheduling},
    {"ioprio_set", kScheduling},
    {"getrlimit", kScheduling},
    {"setrlimit", kScheduling},
    {"prlimit64", kScheduling},
    {"getrusage", kScheduling},
    {"times", kScheduling},
    {"seccomp", kSandboxing},
    {"landlock_create_ruleset", kSandboxing},
    {"landlock_add_rule", kSandboxing},
    {"landlock_restrict_self", kSandboxing},
    {"uname", kSystem},
    {"sysinfo", kSystem},
    {"getrandom", kSystem},
    {"getcpu", kSystem},
};
// clang-format on

// Allowed with some arguments only (the rules are below).
constexpr ListedSyscall kArgumentFiltered[] = {
    {"clone", "without namespace flags (fork, vfork, threads)"},
    {"ioctl", "all requests but TIOCSTI, TIOCLINUX and TIOCSETD"},
    {"socket", "AF_UNIX, AF_INET, AF_INET6 of the usual types and protocols; AF_NETLINK for NETLINK_ROUTE"},
    {"socketpair", "AF_UNIX"},
    {"personality", "Linux, linux32, UNAME26 and the query (Docker's values)"},
};

// Refused on purpose. The box holds no capabilities, so the kernel would refuse many of these
// anyway; the filter removes the code paths from reach (a kernel bug behind a capability check
// is still reachable until the check runs).
constexpr ListedSyscall kRefused[] = {
    // Mounts and the root: init builds the box's view of files; nobody inside changes it.
    {"mount", "mounting filesystems changes the box's view of files"},
    {"umount2", "unmounting could uncover what a mount hides"},
    {"move_mount", "new mount API: same power as mount(2)"},
    {"open_tree", "new mount API: clones mounts"},
    {"open_tree_attr", "new mount API (6.15): clones mounts with attributes"},
    {"fsopen", "new mount API: creates filesystem contexts"},
    {"fsconfig", "new mount API: configures filesystem contexts"},
    {"fsmount", "new mount API: turns a context into a mount"},
    {"fspick", "new mount API: reconfigures existing mounts"},
    {"mount_setattr", "new mount API: changes mount flags (read-only, idmap)"},
    {"statmount", "mount details (6.8), host paths among them"},
    {"listmount", "lists mounts (6.8), beyond what the box's /proc shows"},
    {"pivot_root", "changes the root; only init does that"},
    {"chroot", "changes the root; a classic escape aid"},
    // Namespaces (clone's namespace flags are refused by its rule, clone3 answers ENOSYS).
    {"setns", "joining another namespace leaves the box"},
    {"unshare", "new namespaces (a user namespace above all) open kernel surface meant for root"},
    // Other processes' memory: processes stay opaque to each other.
    {"ptrace", "reads and writes other processes' memory and registers"},
    {"process_vm_readv", "reads another process's memory"},
    {"process_vm_writev", "writes another process's memory"},
    {"pidfd_getfd", "takes a file descriptor out of another process (ptrace-class)"},
    {"process_madvise", "acts on another process's memory (ptrace-class)"},
    {"process_mrelease", "reaps another process's memory"},
    {"kcmp", "compares other processes' kernel objects, leaks kernel pointer order"},
    // NUMA placement: moves pages between nodes, other processes' among them (Docker: CAP_SYS_NICE).
    {"mbind", "NUMA memory policy, a history of kernel bugs"},
    {"set_mempolicy", "NUMA memory policy"},
    {"get_mempolicy", "NUMA memory policy"},
    {"set_mempolicy_home_node", "NUMA memory policy"},
    {"migrate_pages", "moves another process's pages"},
    {"move_pages", "moves another process's pages"},
    // Large or exploit-friendly kernel surface.
    {"bpf", "eBPF programs and maps: large kernel attack surface"},
    {"perf_event_open", "performance counters: kernel attack surface and side channels"},
    {"userfaultfd", "stalls page faults at will, a staple of kernel race exploits"},
    {"io_uring_setup", "io_uring: large attack surface, its operations bypass seccomp"},
    {"io_uring_enter", "io_uring: large attack surface, its operations bypass seccomp"},
    {"io_uring_register", "io_uring: large attack surface, its operations bypass seccomp"},
    {"modify_ldt", "x86 LDT changes: obsolete, a history of kernel bugs"},
    {"remap_file_pages", "deprecated, emulated by the kernel"},
    {"fanotify_init", "filesystem-wide monitoring"},
    {"fanotify_mark", "filesystem-wide monitoring"},
    {"lsm_get_self_attr", "security module attributes (6.8)"},
    {"lsm_set_self_attr", "security module attributes (6.8)"},
    {"lsm_list_modules", "security module list (6.8)"},
    // Kernel keyrings are not namespaced: keys could be shared with the host.
    {"keyctl", "kernel keyring, not namespaced"},
    {"add_key", "kernel keyring, not namespaced"},
    {"request_key", "kernel keyring, not namespaced"},
    // File handles bypass path resolution (the "shocker" escape).
    {"open_by_handle_at", "opens files by handle, bypassing paths and mounts"},
    {"name_to_handle_at", "makes the handles open_by_handle_at takes"},
    // The host itself: kernel, modules, devices, clock, names, logs.
    {"kexec_load", "loads a new kernel"},
    {"kexec_file_load", "loads a new kernel"},
    {"init_module", "loads a kernel module"},
    {"finit_module", "loads a kernel module"},
    {"delete_module", "unloads a kernel module"},
    {"reboot", "reboots the host"},
    {"swapon", "changes the host's swap"},
    {"swapoff", "changes the host's swap"},
    {"acct", "process accounting is host-wide"},
    {"syslog", "kernel log: host messages and kernel addresses"},
    {"quotactl", "filesystem quotas are host-wide"},
    {"quotactl_fd", "filesystem quotas are host-wide"},
    {"lookup_dcookie", "kernel profiling cookies (gone since 6.10)"},
    {"uselib", "obsolete a.out library loader"},
    {"vhangup", "hangs up a terminal for every process using it"},
    {"iopl", "direct I/O port access"},
    {"ioperm", "direct I/O port access"},
    {"settimeofday", "the clock is shared with the host"},
    {"clock_settime", "the clock is shared with the host"},
    {"clock_adjtime", "the clock is shared with the host"},
    {"adjtimex", "the clock is shared with the host"},
    {"sethostname", "the box's name is set by init"},
    {"setdomainname", "the box's name is set by init"},
    {"sysfs", "obsolete filesystem type query"},
    {"ustat", "obsolete, device numbers of the host's filesystems"},
};

// Calls newer than the libseccomp we build with, by number. Numbers from 424 on are the same on
// every architecture (Linux 5.1 unified them), so one number serves all.
struct NewerSyscall {
  std::string_view name;
  int number;
};
constexpr NewerSyscall kNewerThanLibseccomp[] = {
    {"statmount", 457},        {"listmount", 458},     {"lsm_get_self_attr", 459}, {"lsm_set_self_attr", 460},
    {"lsm_list_modules", 461}, {"mseal", 462},         {"setxattrat", 463},        {"getxattrat", 464},
    {"listxattrat", 465},      {"removexattrat", 466}, {"open_tree_attr", 467},    {"file_getattr", 468},
    {"file_setattr", 469},
};

// clone(2) is allowed without any of these: plain fork, vfork and thread clones carry none.
// (CLONE_NEWTIME cannot be passed to clone(2): its bit is part of the exit signal there.)
constexpr uint64_t kNamespaceFlags =
    CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;

// Terminal ioctls that reach beyond the caller: TIOCSTI types into another process's input,
// TIOCLINUX drives the virtual console (selection paste is TIOCSTI again), TIOCSETD switches
// the line discipline, loading rarely used kernel code (n_hdlc, slcan, ...).
constexpr uint32_t kRefusedIoctls[] = {TIOCSTI, TIOCLINUX, TIOCSETD};

// socket(2): the families, types and protocols a box may open. Everything else (AF_PACKET,
// AF_VSOCK, raw IP, SCTP, every rarely used family a distribution kernel autoloads a module
// for) answers EPERM. Protocol 0 means the family's default.
struct SocketKind {
  int family, type, protocol;
};
constexpr SocketKind kAllowedSockets[] = {
    {AF_UNIX, SOCK_STREAM, 0},
    {AF_UNIX, SOCK_DGRAM, 0},
    {AF_UNIX, SOCK_SEQPACKET, 0},
    {AF_INET, SOCK_STREAM, 0},
    {AF_INET, SOCK_STREAM, IPPROTO_TCP},
    {AF_INET, SOCK_STREAM, IPPROTO_MPTCP},  // Go 1.24 listens with MPTCP first
    {AF_INET, SOCK_DGRAM, 0},
    {AF_INET, SOCK_DGRAM, IPPROTO_UDP},
    {AF_INET, SOCK_DGRAM, IPPROTO_ICMP},  // unprivileged ping sockets
    {AF_INET6, SOCK_STREAM, 0},
    {AF_INET6, SOCK_STREAM, IPPROTO_TCP},
    {AF_INET6, SOCK_STREAM, IPPROTO_MPTCP},
    {AF_INET6, SOCK_DGRAM, 0},
    {AF_INET6, SOCK_DGRAM, IPPROTO_UDP},
    {AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6},
    // Routing netlink only (`ip`, getifaddrs); audit, uevents, netfilter and the rest stay out.
    {AF_NETLINK, SOCK_RAW, NETLINK_ROUTE},
    {AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE},
};

// personality(2) values a box may set: Docker's set. Linux, linux32 (`setarch i386` changes
// uname only), UNAME26, both, and 0xffffffff which only queries. The rest (READ_IMPLIES_EXEC,
// ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, ...) weaken memory protections.
constexpr uint64_t kAllowedPersonalities[] = {PER_LINUX, PER_LINUX32, UNAME26, uint64_t{UNAME26} | PER_LINUX32,
                                              0xffffffff};

// Masks for the kernel's `int` and `unsigned int` arguments: the kernel uses the low 32 bits
// only, so a compare on all 64 would let `value | 0xffffffff00000000` slip past a rule.
constexpr uint64_t kLow32 = 0xffffffff;
constexpr uint64_t kSockTypeMask = 0xf;  // SOCK_TYPE_MASK: drops SOCK_NONBLOCK, SOCK_CLOEXEC

using FilterCtx = std::unique_ptr<void, decltype(&seccomp_release)>;

void add_rule(scmp_filter_ctx ctx, uint32_t action, int nr, std::string_view what,
              std::initializer_list<scmp_arg_cmp> args = {}) {
  const std::vector<scmp_arg_cmp> cmps(args);
  const int rc =
      seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(cmps.size()), cmps.empty() ? nullptr : cmps.data());
  if (rc < 0) throw sys_error("seccomp_rule_add(" + std::string(what) + ")", -rc);
}

int required_number(const char* name) {
  const int nr = seccomp_syscall_resolve_name(name);
  if (nr < 0) throw Error(std::string("seccomp: syscall ") + name + " unknown on this architecture");
  return nr;
}

void allow_table(scmp_filter_ctx ctx) {
  for (const ListedSyscall& call : kAllowed) {
    const int nr = native_number(call);
    if (nr < 0) continue;  // not on this architecture
    add_rule(ctx, SCMP_ACT_ALLOW, nr, call.name);
  }
}

// clone3 passes its flags in memory, where seccomp cannot look: answer ENOSYS so glibc falls
// back to clone(2), whose flags are a register the rule checks. x86_64, arm64 and the others
// we build for pass the flags in the first argument.
void allow_clone_without_namespaces(scmp_filter_ctx ctx) {
  add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), required_number("clone3"), "clone3");
  add_rule(ctx, SCMP_ACT_ALLOW, required_number("clone"), "clone", {SCMP_A0(SCMP_CMP_MASKED_EQ, kNamespaceFlags, 0)});
}

// Allows `nr` when the low 32 bits of argument `arg` are none of `refused`. libseccomp can
// neither compare one argument twice in a rule nor let a refusal override an unconditional
// allow, so the allowed values are written as their binary trie: each subtree holding no
// refused value is one masked compare on its prefix (about 32 rules per refused value).
void allow_unless_low32(scmp_filter_ctx ctx, int nr, unsigned arg, std::span<const uint32_t> refused,
                        std::string_view what) {
  const auto visit = [&](const auto& self, uint32_t prefix, unsigned bits) -> void {
    const auto within = [&](uint32_t v) { return bits == 0 || (v >> (32 - bits)) == prefix; };
    if (std::none_of(refused.begin(), refused.end(), within)) {
      const uint64_t mask = bits == 0 ? 0 : (kLow32 << (32 - bits)) & kLow32;
      const uint64_t value = bits == 0 ? 0 : uint64_t{prefix} << (32 - bits);
      add_rule(ctx, SCMP_ACT_ALLOW, nr, what, {scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, mask, value}});
      return;
    }
    if (bits == 32) return;  // a refused value itself
    self(self, prefix << 1, bits + 1);
    self(self, (prefix << 1) | 1, bits + 1);
  };
  visit(visit, 0, 0);
}

void allow_ioctls(scmp_filter_ctx ctx) {
  allow_unless_low32(ctx, required_number("ioctl"), 1, kRefusedIoctls, "ioctl");
}

// The protocol is compared on all 64 bits: a high bit set makes it none of the listed values
// and refused (fails closed); family and type on the bits the kernel reads.
void allow_socket_kinds(scmp_filter_ctx ctx) {
  const int socket_nr = required_number("socket");
  for (const SocketKind& k : kAllowedSockets)
    add_rule(ctx, SCMP_ACT_ALLOW, socket_nr, "socket",
             {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, static_cast<uint64_t>(k.family)),
              SCMP_A1(SCMP_CMP_MASKED_EQ, kSockTypeMask, static_cast<uint64_t>(k.type)),
              SCMP_A2(SCMP_CMP_EQ, static_cast<uint64_t>(k.protocol))});
  add_rule(ctx, SCMP_ACT_ALLOW, required_number("socketpair"), "socketpair",
           {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, AF_UNIX)});
}

// Compared on all 64 bits: glibc never passes more than 32, and anything above is refused.
void allow_personalities(scmp_filter_ctx ctx) {
  const int nr = required_number("personality");
  for (const uint64_t persona : kAllowedPersonalities)
    add_rule(ctx, SCMP_ACT_ALLOW, nr, "personality", {SCMP_A0(SCMP_CMP_EQ, persona)});
}

void set_attr(scmp_filter_ctx ctx, scmp_filter_attr attr, uint32_t value, std::string_view what) {
  const int rc = seccomp_attr_set(ctx, attr, value);
  if (rc < 0) throw sys_error("seccomp_attr_set(" + std::string(what) + ")", -rc);
}

// The program libseccomp would load (seccomp_load and seccomp_export_bpf generate it the same
// way). libseccomp 2.5 exports only into a file descriptor: a memfd, read back whole.
std::vector<sock_filter> exported_program(scmp_filter_ctx ctx) {
  const UniqueFd memfd(memfd_create("agentbox-seccomp-bpf", MFD_CLOEXEC));
  if (!memfd) throw sys_error("memfd_create(agentbox-seccomp-bpf)");
  const int rc = seccomp_export_bpf(ctx, memfd.get());
  if (rc < 0) throw sys_error("seccomp_export_bpf", -rc);
  constexpr size_t kMaxBytes = BPF_MAXINSNS * sizeof(sock_filter);
  const std::string bytes = read_file("/proc/self/fd/" + std::to_string(memfd.get()), kMaxBytes + 1);
  if (bytes.empty() || bytes.size() > kMaxBytes || bytes.size() % sizeof(sock_filter) != 0)
    throw Error("seccomp_export_bpf: " + std::to_string(bytes.size()) + " bytes are no BPF program the kernel takes",
                EINVAL);
  std::vector<sock_filter> program(bytes.size() / sizeof(sock_filter));
  std::memcpy(program.data(), bytes.data(), bytes.size());
  return program;
}

}  // namespace

std::span<const ListedSyscall> allowed_syscalls() { return kAllowed; }
std::span<const ListedSyscall> argument_filtered_syscalls() { return kArgumentFiltered; }
std::span<const ListedSyscall> refused_syscalls() { return kRefused; }

int native_number(const ListedSyscall& call) {
  const int nr = seccomp_syscall_resolve_name(call.name);
  if (nr >= 0) return nr;
  if (nr != __NR_SCMP_ERROR) return -1;  // libseccomp knows it, but not on this architecture
  for (const NewerSyscall& newer : kNewerThanLibseccomp)
    if (newer.name == call.name) return newer.number;
  throw Error(std::string("seccomp: unknown syscall name ") + call.name);
}

std::span<const int> kernel_passthrough_numbers() {
#if defined(__x86_64__)
  static constexpr int kNumbers[] = {335, 336};
  return kNumbers;
#else
  return {};
#endif
}

std::vector<int> listed_numbers() {
  std::vector<int> numbers{required_number("clone3")};
  for (const auto list : {allowed_syscalls(), argument_filtered_syscalls()})
    for (const ListedSyscall& call : list)
      if (const int nr = native_number(call); nr >= 0) numbers.push_back(nr);
  std::sort(numbers.begin(), numbers.end());
  numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
  return numbers;
}

std::vector<sock_filter> build_program() {
  FilterCtx ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)), &seccomp_release);
  if (!ctx) throw Error("seccomp_init: failed", ENOMEM);
  // The context holds the native architecture only. Any other (i386 through int 0x80, x32
  // numbers with bit 30 set, which libseccomp sends here too when x32 is not in the filter)
  // takes this action: a box runs native code only.
  set_attr(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "badarch");
  set_attr(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2, "optimize");  // binary search on numbers

  allow_table(ctx.get());
  allow_clone_without_namespaces(ctx.get());
  allow_ioctls(ctx.get());
  allow_socket_kinds(ctx.get());
  allow_personalities(ctx.get());

  return exported_program(ctx.get());
}

}  // namespace agentbox::seccomp_filter
