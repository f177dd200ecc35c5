#include "net/host_addresses.hpp"

#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <cerrno>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::net {

namespace asio = boost::asio;

namespace {

HostAddresses::Set read_addresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw sys_error("getifaddrs");
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owner(list, ::freeifaddrs);
  HostAddresses::Set set;
  for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || (ifa->ifa_addr->sa_family != AF_INET && ifa->ifa_addr->sa_family != AF_INET6)) continue;
    IpAddress ip = IpAddress::from_sockaddr(ifa->ifa_addr).unmapped();
    if (std::find(set.begin(), set.end(), ip) == set.end()) set.push_back(ip);
  }
  return set;
}

}  // namespace

struct HostAddresses::Watch : std::enable_shared_from_this<Watch> {
  Watch(asio::io_context& io, UniqueFd fd) : socket(asio::make_strand(io), fd.release()) {}

  // Waits for the kernel's next address event; each wait's handler keeps this alive.
  void wait() {
    socket.async_wait(asio::posix::stream_descriptor::wait_read,
                      [self = shared_from_this()](boost::system::error_code ec) {
                        if (ec) return;  // closed (~HostAddresses)
                        self->drain();
                        self->refresh();
                        self->wait();
                      });
  }
  // The messages only say that something changed: read them all, then read the addresses once.
  // ENOBUFS (events lost to a full socket) needs nothing more: the re-read sees the outcome.
  void drain() {
    char buf[8192];
    for (;;) {
      ssize_t n = ::recv(socket.native_handle(), buf, sizeof buf, MSG_DONTWAIT);
      if (n >= 0 || errno == EINTR || errno == ENOBUFS) continue;
      return;  // EAGAIN: all read
    }
  }
  void refresh() {
    std::shared_ptr<const Set> fresh;
    try {
      fresh = std::make_shared<const Set>(read_addresses());
    } catch (const std::exception&) {
      return;  // out of memory or descriptors: the last set stands, the next event retries
    }
    std::lock_guard lock(mu);
    addresses = std::move(fresh);
  }

  asio::posix::stream_descriptor socket;  // on a strand: the close never races the wait
  mutable std::mutex mu;                  // guards addresses
  std::shared_ptr<const Set> addresses;
};

HostAddresses::HostAddresses(asio::io_context& io) {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
  if (!fd) throw sys_error("socket(AF_NETLINK, NETLINK_ROUTE)");
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  local.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  check(::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof local), "bind(netlink address events)");
  watch_ = std::make_shared<Watch>(io, std::move(fd));
  // Subscribed first, read second: an address added between the two is in the read or wakes
  // the first wait.
  watch_->addresses = std::make_shared<const Set>(read_addresses());
  asio::post(watch_->socket.get_executor(), [watch = watch_] { watch->wait(); });
}

HostAddresses::~HostAddresses() {
  asio::post(watch_->socket.get_executor(), [watch = watch_] {
    boost::system::error_code ignored;
    watch->socket.close(ignored);
  });
}

std::shared_ptr<const HostAddresses::Set> HostAddresses::current() const {
  std::lock_guard lock(watch_->mu);
  return watch_->addresses;
}

}  // namespace agentbox::net
