#pragma once
// agentbox-init --zygote: serve clone requests on sock until it closes (see box/zygote.hpp).
// Each request is {"t":"clone","flags":N} with the new init's control and events sockets (and,
// for CLONE_INTO_CGROUP, the group's directory) attached; the reply {"t":"cloned","pid":N}
// carries the new init's pidfd. The child runs init::run on fds 3 and 4, never returning here.
namespace agentbox::init {

int run_zygote(int sock, char** argv);

}  // namespace agentbox::init
