#pragma once
// `agentbox config check FILE`: validates a server config file without starting anything.
#include <string>

namespace agentbox::cli {

// Prints each problem (file, key, line) to stderr, or "FILE: ok"; 0 when the file is good.
int config_check(const std::string& path);

}  // namespace agentbox::cli
