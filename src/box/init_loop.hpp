#pragma once
// agentbox-init's life: receive the spec, contain, report ready, then serve spawn/kill/status
// requests and report exits until the daemon goes away (its socket closes), at which point init
// exits and the kernel kills everything left in the box's pid namespace.
namespace agentbox::init {

int run(int control_fd, int event_fd);

}  // namespace agentbox::init
