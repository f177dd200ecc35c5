// agentbox-init: PID 1 of every box. The daemon (or `agentbox run`) execs it right after
// clone3 with the box's namespaces, control socket on fd 3 and event socket on fd 4.
#include "box/init_loop.hpp"
#include "box/protocol.hpp"

#ifdef AGENTBOX_SANITIZE
// LeakSanitizer needs ptrace, which the box's seccomp filter refuses; init is killed, not
// exited, when a box stops anyway.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

int main() {
  return agentbox::init::run(agentbox::protocol::kInitControlFd, agentbox::protocol::kInitEventFd);
}
