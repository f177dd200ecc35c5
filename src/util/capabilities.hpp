#pragma once
// Capabilities of the calling thread (and of the threads it starts afterwards, which copy them).
namespace agentbox {

// Removes `cap` (CAP_*) from the thread's effective and permitted sets: it cannot be raised
// again. Programs it execs as root get their own full set back. Throws Error.
void drop_capability(int cap);

}  // namespace agentbox
