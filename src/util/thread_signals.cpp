#include "util/thread_signals.hpp"

#include <pthread.h>
#include <signal.h>

#include <initializer_list>

namespace agentbox {

void block_process_signals() {
  sigset_t all;
  sigfillset(&all);
  for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) sigdelset(&all, fault);
  ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

}  // namespace agentbox
