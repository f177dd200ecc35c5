#pragma once
// Network namespaces of boxes: each holds only `lo`, so nothing in a box can reach another
// address (DESIGN §4). Accounts keep one persistent namespace across box restarts.
#include "util/unique_fd.hpp"

namespace agentbox::netns {

// Creates a new network namespace with lo up and returns an fd that keeps it alive. Safe to
// call from a multi-threaded daemon: a short-lived thread unshares, the process stays put.
UniqueFd create_persistent();

// A TCP socket (SOCK_NONBLOCK | SOCK_CLOEXEC) in the namespace netns_fd: the calling thread
// joins it for the socket(2) call and returns to its own namespace before it returns (or fails
// closed: a thread that cannot get back ends the process). For the daemon's /proxy.
UniqueFd socket_in(int netns_fd, int family);

// Init side: joins netns_fd (when >= 0), then brings lo up.
void apply_in_child(int netns_fd);

// Brings the loopback interface of the calling thread's namespace up.
void bring_loopback_up();

}  // namespace agentbox::netns
