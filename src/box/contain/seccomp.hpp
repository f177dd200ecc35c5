#pragma once
// The box's seccomp policy (DESIGN §3): system calls allowed by list, everything else refused
// with EPERM (clone3 ENOSYS, so libc falls back to clone, whose flags can be filtered), never a
// kill, so programs can fall back. A few allowed calls are allowed only with some arguments
// (clone without namespace flags, ioctl but terminal injection, socket of listed families,
// personality of Docker's values). Foreign architectures (i386 via int 0x80, x32 numbers on
// x86_64) kill the process: a box runs native code only.
// The rules (seccomp.cpp) are built with libseccomp once, at build time: agentbox-seccomp-gen
// writes the BPF program into the build dir, and a box start only installs it
// (seccomp_install.cpp), without libseccomp.
#include <linux/filter.h>

#include <span>
#include <vector>

namespace agentbox::seccomp_filter {

// Bumped whenever the policy changes what a box may call; doctor prints it.
constexpr int kPolicyVersion = 2;

struct ListedSyscall {
  const char* name;  // syscall name as libseccomp knows it
  const char* why;   // one line (allowed: what needs it; refused: why not), for doctor and docs
};

// Allowed whatever the arguments. A call a real program needs and the list lacks is one row
// here (and a probe in tests/integration/box_seccomp_test.cpp).
std::span<const ListedSyscall> allowed_syscalls();

// Allowed with some arguments only; the rules are in seccomp.cpp.
std::span<const ListedSyscall> argument_filtered_syscalls();

// Refused, and named because someone might think of allowing them: each with the reason it
// stays out. None of them may be on either list above (a unit test checks).
std::span<const ListedSyscall> refused_syscalls();

// The number of a listed call on this machine's architecture; -1 when the call does not exist
// here (arch_prctl on arm64, say). Throws agentbox::Error for a name neither libseccomp nor our
// table of newer calls knows (a typo must not pass silently).
int native_number(const ListedSyscall& call);

// The native numbers the policy lets through in some form (both lists above, and clone3, which
// answers ENOSYS): every other number answers EPERM. Sorted, no duplicates.
std::vector<int> listed_numbers();

// Numbers the kernel runs past every seccomp filter by design: x86_64's uretprobe (335, 6.11)
// and uprobe (336, 6.16), which only return into or out of a uprobe trampoline and fail (ENXIO)
// or kill the caller (SIGILL) anywhere else. No filter can refuse them; probes leave them out.
std::span<const int> kernel_passthrough_numbers();

// The filter as libseccomp builds it from the rules: a classic BPF program for this machine's
// architecture. Used by the build-time generator, and by the test that proves the embedded
// copy current. Throws agentbox::Error on any failure.
std::vector<sock_filter> build_program();

// The program build_program() gave at build time, compiled in (seccomp_program.cpp, generated
// in the build dir).
std::span<const sock_filter> embedded_program();

// Installs the embedded program in the calling process. Requires PR_SET_NO_NEW_PRIVS already
// set (checked: the containment order sets it before Landlock and seccomp).
// Throws agentbox::Error on any failure (fail closed).
void apply_in_child();

}  // namespace agentbox::seccomp_filter
