#pragma once
// `agentbox doctor`: what this host offers (box/host_support.hpp), what agentbox will enforce
// with it, and how to fix what is missing.
#include <optional>
#include <ostream>
#include <string>

namespace agentbox {

// Prints the feature table, the enforcement summary and one "missing: NAME — FIX" line per
// missing required feature, then what the server config (config_path, else $AGENTBOX_CONFIG,
// else the defaults) gives boxes of Claude Code: optional, so its absence is said, not failed.
// Returns 0 when everything required is present, 1 otherwise.
int run_doctor(bool as_root, std::ostream& out, const std::optional<std::string>& config_path = std::nullopt);

}  // namespace agentbox
