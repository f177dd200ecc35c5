#include "box/contain/netns.hpp"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "util/error.hpp"
#include "util/thread_name.hpp"

namespace agentbox::netns {

void bring_loopback_up() {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) throw sys_error("socket(AF_INET) for lo");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  check(::ioctl(s.get(), SIOCGIFFLAGS, &ifr), "ioctl(lo, SIOCGIFFLAGS)");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  check(::ioctl(s.get(), SIOCSIFFLAGS, &ifr), "ioctl(lo, SIOCSIFFLAGS)");
}

UniqueFd create_persistent() {
  UniqueFd result;
  std::exception_ptr failure;
  // unshare(CLONE_NEWNET) moves only the calling thread, which then dies: the namespace
  // lives on through the fd.
  std::thread([&] {
    name_this_thread("netns-maker");
    try {
      check(::unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)");
      bring_loopback_up();
      result.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
      if (!result) throw sys_error("open(/proc/thread-self/ns/net)");
    } catch (...) {
      failure = std::current_exception();
    }
  }).join();
  if (failure) std::rethrow_exception(failure);
  return result;
}

UniqueFd socket_in(int netns_fd, int family) {
  UniqueFd own(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!own) throw sys_error("open(/proc/thread-self/ns/net)");
  check(::setns(netns_fd, CLONE_NEWNET), "setns(box netns)");
  UniqueFd sock(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int err = errno;
  // A thread left in a box's namespace would make the daemon's next sockets there.
  if (::setns(own.get(), CLONE_NEWNET) != 0) std::abort();
  if (!sock) throw sys_error("socket(in box netns)", err);
  return sock;
}

void apply_in_child(int netns_fd) {
  if (netns_fd >= 0) check(::setns(netns_fd, CLONE_NEWNET), "setns(netns)");
  bring_loopback_up();
}

}  // namespace agentbox::netns
