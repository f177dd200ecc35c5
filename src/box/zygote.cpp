#include "box/zygote.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "box/start_steps.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

// The request never reached a live zygote: nothing was cloned, asking another one is safe.
class ZygoteGone : public Error {
 public:
  using Error::Error;
};

}  // namespace

std::unique_ptr<Zygote> Zygote::start(const std::string& init_path) {
  std::unique_ptr<Zygote> z(new Zygote());
  z->init_path_ = init_path;
  z->launch();
  return z;
}

// posix_spawn: glibc clones vfork-style, safe from a multi-threaded daemon. The zygote gets its
// socket as fd 3 and nothing else of ours but stdio (a box's init keeps those, as before), a
// clean environment, no blocked signals and default dispositions.
void Zygote::launch() {
  auto [ours, theirs] = protocol::socket_pair();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, theirs.get(), protocol::kInitControlFd);
  posix_spawn_file_actions_addclosefrom_np(&fa, protocol::kInitControlFd + 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGCHLD, SIGPIPE, SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const char* argv[] = {"agentbox-init", "--zygote", nullptr};
  const char* envp[] = {protocol::kInitPath, nullptr};
  pid_t pid = -1;
  const int rc =
      ::posix_spawn(&pid, init_path_.c_str(), &fa, &attr, const_cast<char**>(argv), const_cast<char**>(envp));
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw sys_error("posix_spawn(" + init_path_ + " --zygote)", rc);
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) {
    const int err = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw sys_error("pidfd_open(zygote)", err);
  }
  pid_ = pid;
  pidfd_ = std::move(pidfd);
  sock_ = std::move(ours);
}

Zygote::~Zygote() {
  sock_.reset();  // it exits when its socket closes
  if (pid_ > 0) {
    // Bounded: a zygote that does not go within a second is killed.
    pollfd p{pidfd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

Zygote::Init Zygote::clone_init(uint64_t flags, int cgroup_fd, int control, int events, const protocol::StartBox& start,
                                int netns_fd) {
  Init init;
  {
    std::lock_guard lock(mu_);
    if (broken_) relaunch();
    try {
      init = request(flags, cgroup_fd, control, events, start, netns_fd);
    } catch (const ZygoteGone&) {
      relaunch();  // killed or crashed since the last box: once more with a new one
      init = request(flags, cgroup_fd, control, events, start, netns_fd);
    }
  }
  if (!init.etc_template_error.empty()) step_failed(StartStep::etc_template, init.etc_template_error);
  return init;
}

void Zygote::relaunch() {
  if (pid_ > 0) {
    ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  broken_ = false;
  launch();
}

// Descriptors in order: control, events, then the netns and the cgroup when there are.
Zygote::Init Zygote::request(uint64_t flags, int cgroup_fd, int control, int events, const protocol::StartBox& start,
                             int netns_fd) {
  std::vector<int> fds = {control, events};
  if (netns_fd >= 0) fds.push_back(netns_fd);
  if (cgroup_fd >= 0) fds.push_back(cgroup_fd);
  protocol::CloneInit req;
  req.flags = flags;
  req.start = start;
  req.start.has_netns = netns_fd >= 0;
  try {
    protocol::send_message(sock_.get(), req, fds);
  } catch (const Error& e) {
    throw ZygoteGone(e.what());
  }
  // Past this point the zygote may have cloned an init on these sockets: no second try with
  // them (a stray init sees them close and exits); the next request gets a new zygote.
  protocol::Message reply;
  protocol::ZygoteReply answer;
  try {
    reply = protocol::recv_reply(sock_.get(), 10000, "zygote clone");
    answer = protocol::decode<protocol::ZygoteReply>(reply.body);
  } catch (const Error&) {
    broken_ = true;
    throw;
  }
  if (const auto* failed = std::get_if<protocol::CloneFailed>(&answer)) throw Error(failed->message, failed->err);
  const auto& cloned = std::get<protocol::Cloned>(answer);
  if (reply.fds.size() != 1) {
    broken_ = true;
    throw Error("zygote: no pidfd with the clone");
  }
  Init init;
  init.pid = cloned.pid;
  init.pidfd = std::move(reply.fds[0]);
  init.etc_template_error = cloned.etc_template_error;
  return init;
}

}  // namespace agentbox
