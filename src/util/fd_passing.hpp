#pragma once
// Descriptors passed over a Unix socket (SCM_RIGHTS), in one place: the box protocol's messages
// (box/protocol) and the egress listener a helper makes in a box's namespace (net/egress_listener).
#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "util/unique_fd.hpp"

namespace agentbox {

// The most descriptors one message carries.
inline constexpr size_t kMaxPassedFds = 4;

// One sendmsg of data with fds (at most kMaxPassedFds) and MSG_NOSIGNAL | flags, EINTR retried:
// what sendmsg returns, -1 with errno on failure (EINVAL for too many fds). Allocates nothing,
// so a child after fork may call it.
ssize_t send_with_fds(int sock, std::string_view data, std::span<const int> fds, int flags = 0);

// One recvmsg into buf with MSG_CMSG_CLOEXEC | flags (EINTR is the caller's: it may want to
// read on after other errors too): what recvmsg returns, -1 with errno. The descriptors that came
// are appended to fds, owned, even when the message was cut; *msg_flags gets the message's flags
// (MSG_TRUNC, MSG_CTRUNC).
ssize_t recv_with_fds(int sock, void* buf, size_t len, std::vector<UniqueFd>& fds, int flags = 0,
                      int* msg_flags = nullptr);

}  // namespace agentbox
