#pragma once
// Process ids: readable, sortable by start time, and hard to guess ("20261129-193000-a1b2c3d4e5f6").
#include <string>

namespace agentbox::exec {

// UTC start time plus 48 random bits. The caller creates the log file exclusively under the id,
// but logs are per account while the process store's key is global: the bits must make two
// accounts' ids of one second distinct by themselves (24 bits collided under a benchmark's load).
std::string new_process_id();

}  // namespace agentbox::exec
