#pragma once
// agentbox-init's life: receive the StartBox, contain, answer Ready (or StartFailed), then serve
// the daemon's requests (Spawn, Signal, CountProcesses), each answered in order with its id, and
// report every command's exit tagged with its Spawn's id, until the daemon goes away (its
// socket closes); then init exits and the kernel kills everything left in the box's pid
// namespace. Messages: box/messages.hpp.
#include <optional>
#include <vector>

#include "box/messages.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::init {

// The start message with its descriptors (the netns, the /etc tree), when it came another way
// than the control socket (a zygote's clone request).
struct FirstMessage {
  protocol::StartBox start;
  std::vector<UniqueFd> fds;
};

int run(int control_fd, int event_fd, std::optional<FirstMessage> first = std::nullopt);

}  // namespace agentbox::init
