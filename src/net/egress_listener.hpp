#pragma once
// The egress proxy's listening socket in a box's network namespace (DESIGN §4): made in the
// namespace, bound to 127.0.0.1:port there and listening, then served by the proxy's loop in
// its own namespace. The box cannot close, rebind or impersonate it; it can only connect to it.
#include <sys/types.h>

#include <cstdint>

#include "util/unique_fd.hpp"

namespace agentbox::net {

// For the daemon (root): a thread joins the namespace netns_fd for socket(2) only.
// IP_FREEBIND: the namespace's loopback may still be down (its box's init brings it up); the
// socket takes connections once it is up. Throws Error naming the step.
UniqueFd listen_in_netns(int netns_fd, uint16_t port);

// For `agentbox run`: the namespace of process pid (a box's init), which an ordinary user's box
// holds under its own user namespace, which setns(2) from a thread cannot join. A forked child
// (single-threaded, so it may; the caller owns that user namespace) joins the user namespace
// that owns the network namespace when it is not ours, then the network namespace, makes the
// listener and hands it back over a socketpair. Throws Error naming the step that failed.
// Also the daemon's, for an ordinary user's `agentbox mcp` (on a launcher thread): the child
// makes only system calls (no allocation, no lock), so the daemon's other threads do not matter.
UniqueFd listen_in_netns_of(pid_t pid, uint16_t port);

}  // namespace agentbox::net
