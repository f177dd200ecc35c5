#pragma once
// The box's seccomp deny-list (DESIGN §3). Everything not listed is allowed; listed calls fail
// with an errno (EPERM; clone3 ENOSYS so libc falls back to clone, whose flags can be filtered),
// never a kill, so programs can fall back. Foreign architectures (i386 via int 0x80, x32
// numbers on x86_64) kill the process: a box runs native code only.
// The rules (seccomp.cpp) are built with libseccomp once, at build time: agentbox-seccomp-gen
// writes the BPF program into the build dir, and a box start only installs it
// (seccomp_install.cpp), without libseccomp.
#include <linux/filter.h>

#include <span>
#include <vector>

namespace agentbox::seccomp_filter {

struct DeniedSyscall {
  const char* name;  // syscall name as libseccomp knows it
  const char* why;   // one line, for doctor and docs
};

// The list, in one table: unconditional denials. Conditional rules (clone namespace flags,
// clone3, ioctl TIOCSTI/TIOCLINUX, socket families, personality) are documented beside them
// in seccomp.cpp.
std::span<const DeniedSyscall> denied_syscalls();

// The number of a table entry on this machine's architecture; -1 when the call does not
// exist here (iopl on arm64, say), so there is nothing to deny. Throws agentbox::Error for a
// name neither libseccomp nor our table of newer calls knows (a typo must not pass silently).
int native_number(const DeniedSyscall& call);

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
