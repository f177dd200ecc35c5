#include "net/egress_listener.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include "box/contain/netns.hpp"
#include "util/error.hpp"

namespace agentbox::net {

UniqueFd listen_in_netns(int netns_fd, uint16_t port) {
  UniqueFd fd = netns::socket_in(netns_fd, AF_INET);
  int one = 1;
  check(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), "setsockopt(SO_REUSEADDR)");
  check(::setsockopt(fd.get(), IPPROTO_IP, IP_FREEBIND, &one, sizeof one), "setsockopt(IP_FREEBIND)");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  check(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr),
        "bind(127.0.0.1:" + std::to_string(port) + " in the box's namespace)");
  check(::listen(fd.get(), SOMAXCONN), "listen(egress proxy)");
  return fd;
}

}  // namespace agentbox::net
