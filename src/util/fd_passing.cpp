#include "util/fd_passing.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace agentbox {

ssize_t send_with_fds(int sock, std::string_view data, std::span<const int> fds, int flags) {
  if (fds.size() > kMaxPassedFds) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{const_cast<char*>(data.data()), data.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
  while (n < 0 && errno == EINTR);
  return n;
}

ssize_t recv_with_fds(int sock, void* buf, size_t len, std::vector<UniqueFd>& fds, int flags, int* msg_flags) {
  iovec iov{buf, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
  if (n < 0) return n;
  // Owned before anything else looks at the message, so nothing leaks on its error paths.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.emplace_back(fd);
    }
  }
  if (msg_flags) *msg_flags = msg.msg_flags;
  return n;
}

}  // namespace agentbox
