#pragma once
// Turning a fresh clone into a box's init without an exec: what the zygote's child does for each
// of the daemon's boxes (box/zygote.hpp).
#include "box/messages.hpp"

namespace agentbox::init {

// control and events become fds 3 and 4 (netns_fd, when >= 0, fd 5) and every other descriptor
// is closed; signals are unblocked and SIGCHLD is back to its default; the command line beyond
// argv[0] and the whole environment block of the process this is a copy of are wiped from
// memory (whatever process is cloned, its secrets stay out of the box, even in init's memory). Then
// init runs on `start`, the message it would otherwise wait for. Never returns.
[[noreturn]] void become_init(int control, int events, int netns_fd, protocol::StartBox start);

}  // namespace agentbox::init
