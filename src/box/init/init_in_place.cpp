#include "box/init/init_in_place.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "box/init/init_loop.hpp"
#include "box/protocol.hpp"
#include "util/file_io.hpp"

namespace agentbox::init {
namespace {

// The process's argument and environment areas (fields 48-51 of /proc/self/stat): what
// /proc/PID/cmdline and /proc/PID/environ show, wherever environ points now.
struct ArgEnvAreas {
  unsigned long arg_start = 0, arg_end = 0, env_start = 0, env_end = 0;
};

ArgEnvAreas arg_env_areas() {
  ArgEnvAreas a;
  std::string stat;
  try {
    stat = read_file("/proc/self/stat", 4096);
  } catch (const std::exception&) {
    return a;
  }
  // Fields after the command name, which may hold spaces: it ends at the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return a;
  const char* p = stat.c_str() + close + 2;  // field 3
  for (int field = 3; field < 48 && *p; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return a;
    ++p;
  }
  if (std::sscanf(p, "%lu %lu %lu %lu", &a.arg_start, &a.arg_end, &a.env_start, &a.env_end) != 4) return {};
  return a;
}

// name: what argv[0] becomes (as far as the area holds it), or null to keep it.
void wipe_caller_memory(const char* name = nullptr) {
  const ArgEnvAreas a = arg_env_areas();
  if (a.arg_start && a.arg_end > a.arg_start) {
    char* args = reinterpret_cast<char*>(a.arg_start);
    const size_t size = a.arg_end - a.arg_start;
    size_t keep = strnlen(args, size) + 1;  // argv[0] and its NUL
    if (name) {
      std::memset(args, 0, size);
      keep = std::min(std::strlen(name), size - 1);
      std::memcpy(args, name, keep);
      keep += 1;
    }
    if (keep < size) std::memset(args + keep, 0, size - keep);
  }
  if (a.env_start && a.env_end > a.env_start)
    std::memset(reinterpret_cast<char*>(a.env_start), 0, a.env_end - a.env_start);
  environ = nullptr;
}

// Moves control, events (and netns_fd) to 3, 4 (and 5), closes every other descriptor above
// stdio, and leaves signals as an exec'd init finds them.
void take_descriptors(int control, int events, int netns_fd) {
  // All above 5 first, so no dup2 below overwrites a source not yet placed.
  const int sources[3] = {control, events, netns_fd};
  const int count = netns_fd >= 0 ? 3 : 2;
  int moved[3];
  for (int i = 0; i < count; ++i)
    if ((moved[i] = ::fcntl(sources[i], F_DUPFD, protocol::kInitEventFd + 2)) < 0) ::_exit(126);
  for (int i = 0; i < count; ++i)
    if (::dup2(moved[i], protocol::kInitControlFd + i) < 0) ::_exit(126);
  ::syscall(SYS_close_range, protocol::kInitControlFd + count, ~0U, 0);
  ::signal(SIGCHLD, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace

void become_init(int control, int events) {
  take_descriptors(control, events, -1);
  // The caller's stdio (a terminal) is no business of init's: as init_main's for an exec'd one.
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) ::_exit(125);
  ::dup2(null, STDIN_FILENO);
  ::dup2(null, STDOUT_FILENO);
#ifndef AGENTBOX_SANITIZE
  ::dup2(null, STDERR_FILENO);  // sanitizer builds keep stderr, where a report from init would go
#endif
  ::close(null);
  ::prctl(PR_SET_NAME, "agentbox-init");
  wipe_caller_memory("agentbox-init");
  ::_exit(run(protocol::kInitControlFd, protocol::kInitEventFd));
}

void become_init(int control, int events, int netns_fd, protocol::StartBox start) {
  take_descriptors(control, events, netns_fd);
  wipe_caller_memory();

  std::vector<UniqueFd> fds;
  if (netns_fd >= 0) fds.emplace_back(protocol::kInitEventFd + 1);
  ::_exit(run(protocol::kInitControlFd, protocol::kInitEventFd, FirstMessage{std::move(start), std::move(fds)}));
}

}  // namespace agentbox::init
