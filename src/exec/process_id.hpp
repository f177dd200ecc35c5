#pragma once
// Process ids: readable, sortable by start time, and hard to guess ("20261129-193000-a1b2c3").
#include <string>

namespace agentbox::exec {

// UTC start time plus 24 random bits. Uniqueness is checked by the caller (the log file is
// created exclusively under the id).
std::string new_process_id();

}  // namespace agentbox::exec
