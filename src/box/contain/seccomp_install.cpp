// Installs the box's seccomp filter at box start. The program was built from the rules in
// seccomp.cpp at build time (agentbox-seccomp-gen), so this file, and with it agentbox-init,
// needs no libseccomp: one seccomp(2) call instead of 1-2 ms of filter construction per start.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <span>
#include <string>

#include "box/contain/seccomp.hpp"
#include "util/error.hpp"

namespace agentbox::seccomp_filter {

void apply_in_child() {
  // Without no_new_privs a filter would need CAP_SYS_ADMIN and could be shed by exec of a
  // setuid binary: refuse to run out of order rather than set it silently here.
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
    throw Error("seccomp: no_new_privs is not set (containment order)", EPERM);

  const std::span<const sock_filter> program = embedded_program();
  // The generator checks this too; here it keeps the kernel's 16-bit length honest.
  if (program.empty() || program.size() > BPF_MAXINSNS)
    throw Error("seccomp: the embedded program has " + std::to_string(program.size()) + " instructions", EINVAL);
  // The kernel copies the program and never writes through this pointer.
  const sock_fprog fprog{static_cast<unsigned short>(program.size()), const_cast<sock_filter*>(program.data())};
  check(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog), "seccomp(SECCOMP_SET_MODE_FILTER)");
}

}  // namespace agentbox::seccomp_filter
