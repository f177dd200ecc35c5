#pragma once
// Background work that must yield to the boxes and the API: the mirror's passes, the spare
// volumes' refill.
namespace agentbox {

// Lowest CPU (nice 19) and best-effort I/O (7) priority for the calling thread only: Linux
// applies both per thread, and the programs it starts inherit them.
void lower_thread_priority();

}  // namespace agentbox
