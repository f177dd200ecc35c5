#pragma once
// What agentbox-serve's main does once for the whole process (src/daemon/serve_main.cpp):
// SIGPIPE ignored, so a loop thread's write to a pipe whose reader is gone (a command's stdin)
// answers EPIPE instead of ending the test. For the tests that run the daemon's loops.
#include <signal.h>

namespace agentbox::test {

inline const bool kSigpipeIgnored = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

}  // namespace agentbox::test
