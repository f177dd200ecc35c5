#pragma once
// Blocking loopback sockets for the server tests that send what an HTTP client library never
// would (bad framing, slow bytes, oversized heads) and read the raw answer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstdint>
#include <string_view>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::testing {

// Connected to 127.0.0.1:port; a send or receive that waits timeout_s seconds fails.
inline UniqueFd connect_loopback(std::uint16_t port, int timeout_s) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  check(fd.get(), "socket");
  timeval tv{timeout_s, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  check(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), "connect");
  return fd;
}

// false once the peer stops taking bytes (closed, reset, or the timeout).
inline bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace agentbox::testing
