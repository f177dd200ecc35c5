#pragma once
// For a daemon's background thread (the spare volumes' refill, the e2fsprogs runner) started
// before the daemon blocks its stop signals to wait for them on the main thread: a
// process-directed SIGTERM left deliverable there (a second one while the daemon stops) would
// kill the process with its default action, leaving every volume mounted.
namespace agentbox {

// Blocks every signal but the faults (SIGSEGV, SIGBUS, ...: the thread's own) in the calling
// thread; the programs it starts inherit the mask.
void block_process_signals();

}  // namespace agentbox
