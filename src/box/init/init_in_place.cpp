#include "box/init/init_in_place.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

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

void wipe_caller_memory() {
  const ArgEnvAreas a = arg_env_areas();
  if (a.arg_start && a.arg_end > a.arg_start) {
    char* args = reinterpret_cast<char*>(a.arg_start);
    const size_t keep = strnlen(args, a.arg_end - a.arg_start) + 1;  // argv[0] and its NUL
    if (keep < a.arg_end - a.arg_start) std::memset(args + keep, 0, a.arg_end - a.arg_start - keep);
  }
  if (a.env_start && a.env_end > a.env_start)
    std::memset(reinterpret_cast<char*>(a.env_start), 0, a.env_end - a.env_start);
  environ = nullptr;
}

}  // namespace

void become_init(int control, int events, int netns_fd, protocol::StartBox start) {
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
  wipe_caller_memory();

  std::vector<UniqueFd> fds;
  if (netns_fd >= 0) fds.emplace_back(protocol::kInitEventFd + 1);
  ::_exit(run(protocol::kInitControlFd, protocol::kInitEventFd, FirstMessage{std::move(start), std::move(fds)}));
}

}  // namespace agentbox::init
