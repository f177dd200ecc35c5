// agentbox-init: PID 1 of every box. `agentbox run` execs it right after the clone that makes
// the box's namespaces, control socket on fd 3 and event socket on fd 4. The daemon execs it
// once as `agentbox-init --zygote` (request socket on fd 3) and has it clone each box's init.
#include <cstring>

#include "box/init/init_loop.hpp"
#include "box/protocol.hpp"
#include "box/init/zygote_loop.hpp"

#ifdef AGENTBOX_SANITIZE
// LeakSanitizer needs ptrace, which the box's seccomp filter refuses; init is killed, not
// exited, when a box stops anyway.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--zygote") == 0)
    return agentbox::init::run_zygote(agentbox::protocol::kInitControlFd);
  return agentbox::init::run(agentbox::protocol::kInitControlFd, agentbox::protocol::kInitEventFd);
}
