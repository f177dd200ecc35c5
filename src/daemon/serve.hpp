#pragma once
// `agentbox serve`: the Open Terminal API on per-user boxes. Loads the configuration, makes the
// Daemon (daemon/daemon.hpp: every room composed in a written order), runs it until
// SIGTERM/SIGINT, then stops it gracefully.
#include <optional>
#include <string>

namespace agentbox::daemon {

struct ServeOptions {
  std::optional<std::string> config;   // --config FILE (else $AGENTBOX_CONFIG, else none)
  std::optional<std::string> listen;   // --listen ADDR:PORT
  std::optional<std::string> state;    // --state DIR
  std::optional<std::string> cluster;  // --cluster FILE: this daemon is one node of that cluster
  std::optional<std::string> node;     // --node NAME: which one
};

// Returns the exit status. Throws UsageError for bad configuration (exit 2 in main).
int serve(const ServeOptions& options);

}  // namespace agentbox::daemon
