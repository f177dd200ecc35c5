#pragma once
// The daemon ⇄ agentbox-init message set. Each box has two SOCK_SEQPACKET socketpairs:
//   control (fd 3 in init): request → one reply, strictly in turn (spec [cgroup] /ready, spawn,
//                           kill, status)
//   events  (fd 4 in init): init → daemon only (exit of a spawned process)
// Each message is one JSON object with a "t" (type) field; descriptors ride along as SCM_RIGHTS.
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/unique_fd.hpp"

namespace agentbox::protocol {

inline constexpr int kInitControlFd = 3;
inline constexpr int kInitEventFd = 4;
// The whole environment agentbox-init is exec'd with (for a box or as the zygote).
inline constexpr const char* kInitPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
inline constexpr size_t kMaxMessage = 256 * 1024;
inline constexpr size_t kMaxFds = 4;

// Message types.
namespace t {
inline constexpr const char* spec = "spec";                  // daemon → init (+ netns fd)
inline constexpr const char* cgroup = "cgroup";              // daemon → init: now in its cgroup
inline constexpr const char* ready = "ready";                // init → daemon
inline constexpr const char* error = "error";                // init → daemon: a failed step
inline constexpr const char* spawn = "spawn";                // daemon → init (+ 3 stdio fds)
inline constexpr const char* spawned = "spawned";            // init → daemon (+ pty master)
inline constexpr const char* spawn_failed = "spawn_failed";  // init → daemon
inline constexpr const char* kill = "kill";                  // daemon → init
inline constexpr const char* status = "status";              // both ways
inline constexpr const char* ok = "ok";                      // init → daemon
inline constexpr const char* exit = "exit";                  // init → daemon (events socket)
inline constexpr const char* clone = "clone";                // daemon → zygote (+ init's sockets)
inline constexpr const char* cloned = "cloned";              // zygote → daemon (+ init's pidfd)
}  // namespace t

struct Message {
  nlohmann::json body;
  std::vector<UniqueFd> fds;
  std::string type() const { return body.value("t", ""); }
};

// Sends one message (blocking, retries EINTR). Throws agentbox::Error.
void send(int sock, const nlohmann::json& body, std::span<const int> fds = {});

enum class RecvStatus { message, eof, would_block };
// Receives one message. With nonblocking, returns would_block when none is queued.
// Throws agentbox::Error on a malformed or truncated message.
RecvStatus recv(int sock, Message& out, bool nonblocking = false);

// Waits up to timeout_ms for one message on sock; throws on timeout or EOF.
Message recv_reply(int sock, int timeout_ms, const char* what);

// A SOCK_SEQPACKET|SOCK_CLOEXEC socketpair.
std::pair<UniqueFd, UniqueFd> socket_pair();

}  // namespace agentbox::protocol
