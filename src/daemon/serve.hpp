#pragma once
// `agentbox serve`: the Open Terminal API on per-user boxes. Loads the configuration, makes the
// Daemon (daemon/daemon.hpp: every room composed in a written order), runs it until
// SIGTERM/SIGINT, then stops it gracefully.
#include <map>
#include <optional>
#include <string>

#include "box/box_spec.hpp"

namespace agentbox::daemon {

// `agentbox mcp` (daemon/mcp_stdio.hpp): one person, whose boxes are made as `agentbox run`
// makes them; no listener, the MCP tools over stdio.
struct LocalUser {
  std::string user;                        // the one external user id
  BoxSpec spec;                            // the run spec: its binds, limits and cgroup use shape every box
  std::map<std::string, std::string> env;  // set over every command's base environment
  bool network = false;                    // the egress proxy in the box (rules: the config's egress)
};

struct ServeOptions {
  std::optional<std::string> config;   // --config FILE (else $AGENTBOX_CONFIG, else none)
  std::optional<std::string> listen;   // --listen ADDR:PORT
  std::optional<std::string> state;    // --state DIR
  std::optional<std::string> cluster;  // --cluster FILE: this daemon is one node of that cluster
  std::optional<std::string> node;     // --node NAME: which one
  std::optional<LocalUser> local;      // `agentbox mcp`: local single-user mode
};

// Returns the exit status. Throws UsageError for bad configuration (exit 2 in main).
int serve(const ServeOptions& options);

}  // namespace agentbox::daemon
