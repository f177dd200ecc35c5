#include "net/egress_listener.hpp"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "box/contain/netns.hpp"
#include "util/error.hpp"
#include "util/fd_passing.hpp"

namespace agentbox::net {
namespace {

// The steps of a listener, each a plain syscall (the forked child may call nothing else).
// Returns 0, or the failed step's index with errno set.
enum Step { kOk, kUserns, kNetns, kSocket, kReuse, kFreebind, kBind, kListen, kSend, kSteps };
constexpr const char* kStepNames[kSteps] = {"",
                                            "setns(the user namespace owning the box's network)",
                                            "setns(the box's network namespace)",
                                            "socket(AF_INET)",
                                            "setsockopt(SO_REUSEADDR)",
                                            "setsockopt(IP_FREEBIND)",
                                            "bind(127.0.0.1 in the box's namespace)",
                                            "listen(egress proxy)",
                                            "sendmsg(the listener)"};

Step bind_loopback(int fd, uint16_t port) {
  int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) return kReuse;
  if (::setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof one) != 0) return kFreebind;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return kBind;
  if (::listen(fd, SOMAXCONN) != 0) return kListen;
  return kOk;
}

Error step_error(Step step, int err, uint16_t port) {
  std::string what = kStepNames[step];
  if (step == kBind) what = "bind(127.0.0.1:" + std::to_string(port) + " in the box's namespace)";
  return sys_error(what, err);
}

bool same_namespace(int a, int b) {
  struct stat sa {
  }, sb{};
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

UniqueFd open_ns(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw sys_error("open(" + path + ")");
  return fd;
}

// The child's half: only syscalls from here to _exit. Reports {step, errno} or sends the fd.
[[noreturn]] void child_listen(int userns, int netns, int channel, uint16_t port) {
  int report[2] = {kOk, 0};
  int fd = -1;
  auto fail = [&](Step step) {
    report[0] = step;
    report[1] = errno;
    (void)!::write(channel, report, sizeof report);
    ::_exit(1);
  };
  if (userns >= 0 && ::setns(userns, CLONE_NEWUSER) != 0) fail(kUserns);
  if (::setns(netns, CLONE_NEWNET) != 0) fail(kNetns);
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(kSocket);
  if (Step s = bind_loopback(fd, port); s != kOk) fail(s);
  const int fds[1] = {fd};
  if (send_with_fds(channel, std::string_view(reinterpret_cast<const char*>(report), sizeof report), fds) !=
      static_cast<ssize_t>(sizeof report))
    fail(kSend);
  ::_exit(0);
}

}  // namespace

UniqueFd listen_in_netns(int netns_fd, uint16_t port) {
  UniqueFd fd = netns::socket_in(netns_fd, AF_INET);
  if (Step s = bind_loopback(fd.get(), port); s != kOk) throw step_error(s, errno, port);
  return fd;
}

UniqueFd listen_in_netns_of(pid_t pid, uint16_t port) {
  const std::string proc = "/proc/" + std::to_string(pid) + "/ns/";
  UniqueFd netns = open_ns(proc + "net");
  // The user namespace that owns the network namespace, not init's own: init of an ordinary
  // user's box sits in a nested one, from which the network namespace cannot be joined.
  UniqueFd userns(::ioctl(netns.get(), NS_GET_USERNS));
  if (!userns) throw sys_error("ioctl(NS_GET_USERNS) on the box's network namespace");
  if (same_namespace(userns.get(), open_ns("/proc/self/ns/user").get())) userns.reset();  // setns would refuse

  int pair[2];
  check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), "socketpair");
  UniqueFd ours(pair[0]), theirs(pair[1]);
  const pid_t child = ::fork();
  if (child < 0) throw sys_error("fork");
  if (child == 0) child_listen(userns ? userns.get() : -1, netns.get(), theirs.get(), port);
  theirs.reset();

  int report[2] = {kOk, 0};
  std::vector<UniqueFd> fds;
  ssize_t n;
  do n = recv_with_fds(ours.get(), report, sizeof report, fds);
  while (n < 0 && errno == EINTR);
  const int recv_errno = errno;
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  UniqueFd listener = n > 0 && !fds.empty() ? std::move(fds.front()) : UniqueFd();
  if (n < 0) throw sys_error("recvmsg(the listener)", recv_errno);
  if (n != static_cast<ssize_t>(sizeof report) || report[0] < kOk || report[0] >= kSteps)
    throw Error("the helper that makes the egress listener exited without one");
  if (report[0] != kOk) throw step_error(static_cast<Step>(report[0]), report[1], port);
  if (!listener) throw Error("the helper that makes the egress listener sent no descriptor");
  ::fcntl(listener.get(), F_SETFL, ::fcntl(listener.get(), F_GETFL) | O_NONBLOCK);
  return listener;
}

}  // namespace agentbox::net
