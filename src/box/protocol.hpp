#pragma once
// How the daemon, the zygote and a box's init talk: SOCK_SEQPACKET socketpairs, one JSON object
// per message, descriptors riding along as SCM_RIGHTS. Each box has two:
//   control (fd 3 in init): the start, then requests and their replies
//   events  (fd 4 in init): init → daemon only (exits)
// What the messages are is box/messages.hpp; this is the transport.
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/fd_passing.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::protocol {

inline constexpr int kInitControlFd = 3;
inline constexpr int kInitEventFd = 4;
// The whole environment agentbox-init is exec'd with (for a box or as the zygote).
inline constexpr const char* kInitPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
inline constexpr size_t kMaxMessage = 256 * 1024;
inline constexpr size_t kMaxFds = kMaxPassedFds;

struct Message {
  nlohmann::json body;
  std::vector<UniqueFd> fds;
};

// Sends one message (blocking, retries EINTR). Throws agentbox::Error.
void send(int sock, const nlohmann::json& body, std::span<const int> fds = {});
// Sends one serialized message without waiting: false when the socket is full (EAGAIN), so
// an event loop can wait for room. Throws agentbox::Error on anything else.
bool try_send(int sock, std::string_view data, std::span<const int> fds = {});

enum class RecvStatus { message, eof, would_block };
// Receives one message. With nonblocking, returns would_block when none is queued.
// Throws agentbox::Error on a malformed or truncated message.
RecvStatus recv(int sock, Message& out, bool nonblocking = false);

// Waits up to timeout_ms for one message on sock; throws on timeout or EOF.
Message recv_reply(int sock, int timeout_ms, const char* what);

// A SOCK_SEQPACKET|SOCK_CLOEXEC socketpair.
std::pair<UniqueFd, UniqueFd> socket_pair();

}  // namespace agentbox::protocol
