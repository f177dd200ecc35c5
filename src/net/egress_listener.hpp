#pragma once
// The egress proxy's listening socket in an account's network namespace (DESIGN §4): made in
// the namespace (a thread joins it for socket(2) only), bound to 127.0.0.1:port there and
// listening, then served by the daemon's loop in its own namespace. The box cannot close,
// rebind or impersonate it; it can only connect to it.
#include <cstdint>

#include "util/unique_fd.hpp"

namespace agentbox::net {

// IP_FREEBIND: the namespace's loopback may still be down (its box's init brings it up); the
// socket takes connections once it is up. Throws Error naming the step.
UniqueFd listen_in_netns(int netns_fd, uint16_t port);

}  // namespace agentbox::net
