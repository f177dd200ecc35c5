#include "box/protocol.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>

#include "util/error.hpp"
#include "util/fd_passing.hpp"

namespace agentbox::protocol {

namespace {

// One message out, with its descriptors (util/fd_passing); -1 with errno (E2BIG: too large).
ssize_t send_once(int sock, std::string_view data, std::span<const int> fds, int flags) {
  if (data.size() > kMaxMessage) {
    errno = E2BIG;
    return -1;
  }
  return send_with_fds(sock, data, fds, flags);
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
  // A peer that closed with messages of ours unread resets the connection: the kernel reports
  // ECONNRESET once, ahead of what the peer sent before closing. Read on after it, so that
  // last message (an init's start error) is not lost; end of file follows it.
  out.fds.clear();
  int msg_flags = 0;
  ssize_t n;
  bool reset_seen = false;
  for (;;) {
    n = recv_with_fds(sock, buf.get(), kMaxMessage, out.fds, nonblocking ? MSG_DONTWAIT : 0, &msg_flags);
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
  if (n == 0) return RecvStatus::eof;
  if (msg_flags & (MSG_TRUNC | MSG_CTRUNC)) throw Error("protocol: truncated message");
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
