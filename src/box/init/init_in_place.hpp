#pragma once
// Turning a fresh clone into a box's init without an exec: what the zygote's child does for each
// of the daemon's boxes (box/zygote.hpp), and `agentbox run`'s own copy (ClonePath::in_place).
#include "box/messages.hpp"

namespace agentbox::init {

// control and events become fds 3 and 4 (netns_fd, when >= 0, fd 5) and every other descriptor
// is closed; signals are unblocked and SIGCHLD is back to its default; the command line beyond
// argv[0] and the whole environment block of the process this is a copy of are wiped from
// memory (whatever process is cloned, its secrets stay out of the box, even in init's memory). Then
// init runs on `start`, the message it would otherwise wait for. Never returns.
[[noreturn]] void become_init(int control, int events, int netns_fd, protocol::StartBox start);

// The same for a copy of any single-threaded process (the CLI): its stdio becomes /dev/null as
// an exec'd init's does, its command line reads "agentbox-init" as far as the caller's fits, and
// init waits for its StartBox on control, as an exec'd init does.
[[noreturn]] void become_init(int control, int events);

}  // namespace agentbox::init
