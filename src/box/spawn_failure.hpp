#pragma once
// What init's SpawnFailed becomes on the daemon's side (Box and BoxOwner both): the command's
// own failure is a SpawnError; a box that holds all its ptys is BoxLimitReached (429, naming
// [box] ptys); a host whose pty pool is spent is BoxUnavailable (503, try again later).
#include <exception>

#include "box/messages.hpp"

namespace agentbox {

std::exception_ptr spawn_failure_error(const protocol::SpawnFailed& failed);

}  // namespace agentbox
