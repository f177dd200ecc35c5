#include "box/protocol.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>

#include "util/error.hpp"

namespace agentbox::protocol {

namespace {

// sendmsg of data with fds; -1 with errno on failure (EINTR retried).
ssize_t send_once(int sock, std::string_view data, std::span<const int> fds, int flags) {
  if (data.size() > kMaxMessage) {
    errno = E2BIG;
    return -1;
  }
  if (fds.size() > kMaxFds) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{const_cast<char*>(data.data()), data.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
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
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
  } while (n < 0 && errno == EINTR);
  return n;
}

}  // namespace

void send(int sock, const nlohmann::json& body, std::span<const int> fds) {
  const std::string data = body.dump();
  if (send_once(sock, data, fds, 0) < 0) {
    if (errno == E2BIG) throw Error("protocol: message too large", E2BIG);
    throw sys_error("sendmsg(" + body.value("t", std::string("?")) + ")");
  }
}

bool try_send(int sock, std::string_view data, std::span<const int> fds) {
  if (send_once(sock, data, fds, MSG_DONTWAIT) >= 0) return true;
  if (errno == EAGAIN) return false;
  if (errno == E2BIG) throw Error("protocol: message too large", E2BIG);
  throw sys_error("sendmsg");
}

RecvStatus recv(int sock, Message& out, bool nonblocking) {
  // One uninitialised buffer per thread: only the pages a message fills are ever touched (a
  // zero-filled string per call cost a 256 KiB memset and, in init after clone, COW faults).
  thread_local std::unique_ptr<char[]> buf(new char[kMaxMessage]);
  iovec iov{buf.get(), kMaxMessage};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  // A peer that closed with messages of ours unread resets the connection: the kernel reports
  // ECONNRESET once, ahead of what the peer sent before closing. Read on after it, so that
  // last message (an init's start error) is not lost; end of file follows it.
  ssize_t n;
  bool reset_seen = false;
  for (;;) {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (nonblocking ? MSG_DONTWAIT : 0));
    if (n >= 0) break;
    if (errno == EINTR) continue;
    if (errno == ECONNRESET && !reset_seen) {
      reset_seen = true;
      continue;
    }
    break;
  }
  if (n < 0) {
    if (errno == EAGAIN) return RecvStatus::would_block;
    if (errno == ECONNRESET) return RecvStatus::eof;
    throw sys_error("recvmsg");
  }

  // Take ownership of any descriptors first, so nothing leaks on the error paths below.
  out.fds.clear();
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      out.fds.emplace_back(fd);
    }
  }
  if (n == 0) return RecvStatus::eof;
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) throw Error("protocol: truncated message");
  out.body = nlohmann::json::parse(buf.get(), buf.get() + n, nullptr, /*allow_exceptions=*/false);
  if (out.body.is_discarded()) throw Error("protocol: a message that is not JSON");
  return RecvStatus::message;
}

Message recv_reply(int sock, int timeout_ms, const char* what) {
  pollfd p{sock, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r < 0) throw sys_error(std::string("poll(") + what + ")");
  if (r == 0) throw Error(std::string(what) + ": box init did not answer in time", ETIMEDOUT);
  Message m;
  if (recv(sock, m) != RecvStatus::message) throw Error(std::string(what) + ": box init exited", EPIPE);
  return m;
}

std::pair<UniqueFd, UniqueFd> socket_pair() {
  int sv[2];
  check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), "socketpair");
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

}  // namespace agentbox::protocol
