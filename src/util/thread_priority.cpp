#include "util/thread_priority.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace agentbox {

void lower_thread_priority() {
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  ::setpriority(PRIO_PROCESS, tid, 19);
  constexpr int kIoprioWhoProcess = 1, kIoprioClassBestEffort = 2, kIoprioClassShift = 13;
  ::syscall(SYS_ioprio_set, kIoprioWhoProcess, 0, (kIoprioClassBestEffort << kIoprioClassShift) | 7);
}

}  // namespace agentbox
