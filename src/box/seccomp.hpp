#pragma once
// The box's seccomp deny-list (DESIGN §3), built with libseccomp. Everything not listed is
// allowed; listed calls fail with an errno (EPERM; clone3 ENOSYS so libc falls back to clone,
// whose flags can be filtered), never a kill, so programs can fall back. Foreign architectures
// (i386 via int 0x80, x32 numbers on x86_64) kill the process: a box runs native code only.
#include <span>

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

// Loads the filter into the calling process. Requires PR_SET_NO_NEW_PRIVS already set
// (checked: the containment order sets it before Landlock and seccomp).
// Throws agentbox::Error on any failure (fail closed).
void apply_in_child();

}  // namespace agentbox::seccomp_filter
