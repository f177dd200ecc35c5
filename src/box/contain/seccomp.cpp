#include "box/contain/seccomp.hpp"

#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::seccomp_filter {
namespace {

// Unconditional denials, all answered with EPERM. The box holds no capabilities, so the kernel
// would refuse many of these anyway; the filter removes the code paths from reach (a kernel
// bug behind a capability check is still reachable until the check runs).
constexpr DeniedSyscall kDenied[] = {
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
    {"pivot_root", "changes the root; only init does that"},
    {"chroot", "changes the root; a classic escape aid"},
    // Namespaces (clone's namespace flags are refused below, clone3 answers ENOSYS).
    {"setns", "joining another namespace leaves the box"},
    {"unshare", "new namespaces (a user namespace above all) open kernel surface meant for root"},
    // Other processes' memory: processes stay opaque to each other.
    {"ptrace", "reads and writes other processes' memory and registers"},
    {"process_vm_readv", "reads another process's memory"},
    {"process_vm_writev", "writes another process's memory"},
    {"pidfd_getfd", "takes a file descriptor out of another process (ptrace-class)"},
    {"process_madvise", "acts on another process's memory (ptrace-class)"},
    {"kcmp", "compares other processes' kernel objects, leaks kernel pointer order"},
    // Large or exploit-friendly kernel surface.
    {"bpf", "eBPF programs and maps: large kernel attack surface"},
    {"perf_event_open", "performance counters: kernel attack surface and side channels"},
    {"userfaultfd", "stalls page faults at will, a staple of kernel race exploits"},
    {"io_uring_setup", "io_uring: large attack surface, its operations bypass seccomp"},
    {"io_uring_enter", "io_uring: large attack surface, its operations bypass seccomp"},
    {"io_uring_register", "io_uring: large attack surface, its operations bypass seccomp"},
    {"modify_ldt", "x86 LDT changes: obsolete, a history of kernel bugs"},
    // Kernel keyrings are not namespaced: keys could be shared with the host.
    {"keyctl", "kernel keyring, not namespaced"},
    {"add_key", "kernel keyring, not namespaced"},
    {"request_key", "kernel keyring, not namespaced"},
    // File handles bypass path resolution (the "shocker" escape).
    {"open_by_handle_at", "opens files by handle, bypassing paths and mounts"},
    {"name_to_handle_at", "makes the handles open_by_handle_at takes"},
    // The host itself: kernel, modules, devices, clock, logs.
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
};

// Calls newer than the libseccomp we build with, by number. Numbers from 424 on are the same on
// every architecture (Linux 5.1 unified them), so one number serves all.
struct NewerSyscall {
  std::string_view name;
  int number;
};
constexpr NewerSyscall kNewerThanLibseccomp[] = {
    {"open_tree_attr", 467},
};

// clone(2) with any of these is refused; plain fork, vfork and thread clones carry none.
// (CLONE_NEWTIME cannot be passed to clone(2): its bit is part of the exit signal there.)
constexpr unsigned long kNamespaceFlags[] = {
    CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
    CLONE_NEWIPC, CLONE_NEWUTS,  CLONE_NEWCGROUP,
};

// Terminal ioctls that reach beyond the caller: TIOCSTI types into another process's input,
// TIOCLINUX drives the virtual console (selection paste is TIOCSTI again).
constexpr unsigned long kDeniedIoctls[] = {TIOCSTI, TIOCLINUX};

// personality(2) values a box may set: Docker's set. Linux, linux32 (`setarch i386` changes
// uname only), UNAME26, both, and 0xffffffff which only queries. The rest (READ_IMPLIES_EXEC,
// ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, ...) weaken memory protections.
constexpr uint64_t kPersonalityQuery = 0xffffffff;
constexpr unsigned kPersonalityAllowedBits[] = {3 /* PER_LINUX32 */, 17 /* UNAME26 */};
static_assert(PER_LINUX32 == (1u << 3) && UNAME26 == (1u << 17));

// Masks for the kernel's `int` and `unsigned int` arguments: the kernel uses the low 32 bits
// only, so a compare on all 64 would let `value | 0xffffffff00000000` slip past a rule.
constexpr uint64_t kLow32 = 0xffffffff;
constexpr uint64_t kSockTypeMask = 0xf;  // SOCK_TYPE_MASK: drops SOCK_NONBLOCK, SOCK_CLOEXEC

using FilterCtx = std::unique_ptr<void, decltype(&seccomp_release)>;

void add_rule(scmp_filter_ctx ctx, uint32_t action, int nr, std::string_view what,
              std::initializer_list<scmp_arg_cmp> args = {}) {
  const std::vector<scmp_arg_cmp> cmps(args);
  const int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(cmps.size()),
                                        cmps.empty() ? nullptr : cmps.data());
  if (rc < 0) throw sys_error("seccomp_rule_add(" + std::string(what) + ")", -rc);
}

int required_number(const char* name) {
  const int nr = seccomp_syscall_resolve_name(name);
  if (nr < 0) throw Error(std::string("seccomp: syscall ") + name + " unknown on this architecture");
  return nr;
}

void deny_table(scmp_filter_ctx ctx) {
  for (const DeniedSyscall& call : kDenied) {
    const int nr = native_number(call);
    if (nr < 0) continue;  // not on this architecture: nothing to call
    add_rule(ctx, SCMP_ACT_ERRNO(EPERM), nr, call.name);
  }
}

// clone3 passes its flags in memory, where seccomp cannot look: answer ENOSYS so glibc falls
// back to clone(2), whose flags are a register the rules below check.
void deny_namespace_clones(scmp_filter_ctx ctx) {
  add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), required_number("clone3"), "clone3");
  const int clone_nr = required_number("clone");
  // One rule per flag: libseccomp ORs rules, while one rule allows one compare per argument.
  // x86_64, arm64 and the others we build for pass the flags in the first argument.
  for (const unsigned long flag : kNamespaceFlags)
    add_rule(ctx, SCMP_ACT_ERRNO(EPERM), clone_nr, "clone namespace flag",
             {SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)});
}

void deny_terminal_injection(scmp_filter_ctx ctx) {
  const int ioctl_nr = required_number("ioctl");
  for (const unsigned long request : kDeniedIoctls)
    add_rule(ctx, SCMP_ACT_ERRNO(EPERM), ioctl_nr, "ioctl",
             {SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, request)});
}

// AF_PACKET (and AF_INET's obsolete SOCK_PACKET alias of it) sees and forges raw frames;
// AF_VSOCK talks to the hypervisor; netlink families other than NETLINK_ROUTE reach audit,
// uevents, netfilter and more (NETLINK_ROUTE stays: `ip` and getifaddrs need it); raw IP
// sockets need CAP_NET_RAW, refused here as well in case a box ever holds it.
void deny_socket_families(scmp_filter_ctx ctx) {
  const int socket_nr = required_number("socket");
  const auto family = [](uint64_t af) { return SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, af); };
  const auto type = [](uint64_t t) { return SCMP_A1(SCMP_CMP_MASKED_EQ, kSockTypeMask, t); };
  add_rule(ctx, SCMP_ACT_ERRNO(EPERM), socket_nr, "socket(AF_PACKET)", {family(AF_PACKET)});
  add_rule(ctx, SCMP_ACT_ERRNO(EPERM), socket_nr, "socket(AF_VSOCK)", {family(AF_VSOCK)});
  // Protocol compared on all 64 bits: a high bit set makes it "not 0" and refused (fails closed).
  add_rule(ctx, SCMP_ACT_ERRNO(EPERM), socket_nr, "socket(AF_NETLINK)",
           {family(AF_NETLINK), SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE)});
  for (const int af : {AF_INET, AF_INET6}) {
    add_rule(ctx, SCMP_ACT_ERRNO(EPERM), socket_nr, "socket(SOCK_RAW)", {family(af), type(SOCK_RAW)});
    add_rule(ctx, SCMP_ACT_ERRNO(EPERM), socket_nr, "socket(SOCK_PACKET)",
             {family(af), type(SOCK_PACKET)});
  }
}

// libseccomp allows one compare per argument in a rule, so "not one of five values" is written
// as its complement, a union of single compares (personality takes an unsigned int):
//   above 32 bits                                   -> refused (glibc never passes such values)
//   bit 31 clear and any bit b other than 3, 17 set -> refused (0, 8, 0x20000, 0x20008 pass)
//   bit 31 set and any bit c below 31 clear         -> refused (only 0xffffffff passes)
void restrict_personality(scmp_filter_ctx ctx) {
  const int nr = required_number("personality");
  add_rule(ctx, SCMP_ACT_ERRNO(EPERM), nr, "personality", {SCMP_A0(SCMP_CMP_GT, kPersonalityQuery)});
  constexpr uint64_t bit31 = 1ull << 31;
  for (unsigned b = 0; b < 31; ++b) {
    const uint64_t bit = 1ull << b;
    const bool allowed = b == kPersonalityAllowedBits[0] || b == kPersonalityAllowedBits[1];
    if (!allowed)
      add_rule(ctx, SCMP_ACT_ERRNO(EPERM), nr, "personality",
               {SCMP_A0(SCMP_CMP_MASKED_EQ, bit31 | bit, bit)});
    add_rule(ctx, SCMP_ACT_ERRNO(EPERM), nr, "personality",
             {SCMP_A0(SCMP_CMP_MASKED_EQ, bit31 | bit, bit31)});
  }
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
    throw Error("seccomp_export_bpf: " + std::to_string(bytes.size()) +
                    " bytes are no BPF program the kernel takes",
                EINVAL);
  std::vector<sock_filter> program(bytes.size() / sizeof(sock_filter));
  std::memcpy(program.data(), bytes.data(), bytes.size());
  return program;
}

}  // namespace

std::span<const DeniedSyscall> denied_syscalls() { return kDenied; }

int native_number(const DeniedSyscall& call) {
  const int nr = seccomp_syscall_resolve_name(call.name);
  if (nr >= 0) return nr;
  if (nr != __NR_SCMP_ERROR) return -1;  // libseccomp knows it, but not on this architecture
  for (const NewerSyscall& newer : kNewerThanLibseccomp)
    if (newer.name == call.name) return newer.number;
  throw Error(std::string("seccomp: unknown syscall name ") + call.name);
}

std::vector<sock_filter> build_program() {
  FilterCtx ctx(seccomp_init(SCMP_ACT_ALLOW), &seccomp_release);
  if (!ctx) throw Error("seccomp_init: failed", ENOMEM);
  // The context holds the native architecture only. Any other (i386 through int 0x80, x32
  // numbers with bit 30 set, which libseccomp sends here too when x32 is not in the filter)
  // takes this action: a box runs native code only.
  set_attr(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "badarch");
  set_attr(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2, "optimize");  // binary search on numbers

  deny_table(ctx.get());
  deny_namespace_clones(ctx.get());
  deny_terminal_injection(ctx.get());
  deny_socket_families(ctx.get());
  restrict_personality(ctx.get());

  return exported_program(ctx.get());
}

}  // namespace agentbox::seccomp_filter
