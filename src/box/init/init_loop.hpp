#pragma once
// agentbox-init's life: receive the spec, contain, report ready, then serve spawn/kill/status
// requests and report exits until the daemon goes away (its socket closes), at which point init
// exits and the kernel kills everything left in the box's pid namespace.
#include <optional>

#include "box/protocol.hpp"

namespace agentbox::init {

// first: the spec message when it came another way (a zygote's clone request), else it is
// received on control_fd.
int run(int control_fd, int event_fd, std::optional<protocol::Message> first = std::nullopt);

}  // namespace agentbox::init
