#pragma once
// Who the box runs as: the account's uid/gid, no supplementary groups, no capabilities in any
// set (effective, permitted, inheritable, bounding, ambient).
#include <sys/types.h>

#include "box/box_spec.hpp"

namespace agentbox::identity {

// Parent side, user_ns mode: maps the box's outer user namespace root onto the caller
// (uid_map "0 OUTER 1", setgroups deny, gid_map "0 OUTER 1"). Runs before init is told to go.
void apply_from_parent(const BoxSpec& spec, pid_t init_pid);

// Child side: becomes spec.uid/spec.gid with nothing left to regain. In user_ns mode it first
// enters a nested user namespace that maps spec.uid onto the outer root (= the caller).
void apply_in_child(const BoxSpec& spec);

// True if the calling process holds no capability in any set (checked after the drop).
bool holds_no_capabilities();

}  // namespace agentbox::identity
