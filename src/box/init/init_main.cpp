// agentbox-init: PID 1 of every box. A starter without a zygote execs it right after the clone
// that makes the box's namespaces, control socket on fd 3 and event socket on fd 4 (`agentbox
// run` instead has a copy of itself become init: init_in_place.hpp). The daemon execs it
// once as `agentbox-init --zygote` (request socket on fd 3) and has it clone each box's init.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "box/init/init_loop.hpp"
#include "box/init/zygote_loop.hpp"
#include "box/protocol.hpp"

#ifdef AGENTBOX_SANITIZE
// LeakSanitizer needs ptrace, which the box's seccomp filter refuses; init is killed, not
// exited, when a box stops anyway.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

namespace {

// Init's stdio is whatever its starter had (the daemon's log, the terminal of `agentbox run`'s
// caller); a process of the box could write into it or read it back through /proc/1/fd. Every
// command gets the stdio its request names, so init itself needs none. Sanitizer builds keep
// stderr, where a report from init would go.
void drop_inherited_stdio() {
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) ::_exit(125);
  ::dup2(null, STDIN_FILENO);
  ::dup2(null, STDOUT_FILENO);
#ifndef AGENTBOX_SANITIZE
  ::dup2(null, STDERR_FILENO);
#endif
  if (null > STDERR_FILENO) ::close(null);
}

}  // namespace

int main(int argc, char** argv) {
  drop_inherited_stdio();
  if (argc == 2 && std::strcmp(argv[1], "--zygote") == 0)
    return agentbox::init::run_zygote(agentbox::protocol::kInitControlFd);
  return agentbox::init::run(agentbox::protocol::kInitControlFd, agentbox::protocol::kInitEventFd);
}
