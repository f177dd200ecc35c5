#pragma once
// agentbox-init --zygote: serve clone requests on sock until it closes (see box/zygote.hpp).
// Each request is {"t":"clone","flags":N,"netns":B,"first":SPEC} with the new init's control and
// events sockets, then the netns (when B) and, for CLONE_INTO_CGROUP, the group's directory
// attached; the reply {"t":"cloned","pid":N} carries the new init's pidfd. The child becomes
// that init (init_in_place.hpp).
namespace agentbox::init {

int run_zygote(int sock);

}  // namespace agentbox::init
