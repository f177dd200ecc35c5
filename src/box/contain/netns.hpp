#pragma once
// Network namespaces of boxes: each holds only `lo`, so nothing in a box can reach another
// address (DESIGN §4). Accounts keep one persistent namespace across box restarts.
#include "util/unique_fd.hpp"

namespace agentbox::netns {

// Creates a new network namespace with lo up and returns an fd that keeps it alive. Safe to
// call from a multi-threaded daemon: a short-lived thread unshares, the process stays put.
UniqueFd create_persistent();

// Init side: joins netns_fd (when >= 0), then brings lo up.
void apply_in_child(int netns_fd);

// Brings the loopback interface of the calling thread's namespace up.
void bring_loopback_up();

}  // namespace agentbox::netns
