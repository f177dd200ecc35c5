#include "util/thread_name.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstring>

namespace agentbox {

void name_this_thread(std::string_view name) noexcept {
  char buf[16] = {};  // the kernel's TASK_COMM_LEN, with its terminating zero
  std::memcpy(buf, name.data(), std::min(name.size(), sizeof buf - 1));
  ::pthread_setname_np(::pthread_self(), buf);
}

}  // namespace agentbox
