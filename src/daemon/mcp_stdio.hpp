#pragma once
// `agentbox mcp`: the MCP tools for one person on their own machine, over stdin and stdout, on
// boxes made as `agentbox run` makes them (its profile and flags: the home, binds, limits,
// network, variables). It is the daemon's composition (daemon/daemon.hpp) in a local mode: one
// user, no listener, no quotas (plain directory homes), the run home as that user's home, the
// MCP methods of /mcp (mcp/dispatch.hpp) fed from stdin (mcp/stdio_server.hpp). So every tool
// call runs the same code as the REST route it mirrors.
//
// Run by root, everything it makes is in a mount namespace of its own: the state (a tmpfs over
// $XDG_STATE_HOME/agentbox/mcp, else ~/.local/state/agentbox/mcp) and the home's bind mount go
// with the process; boxes and their cgroups are stopped when stdin ends. Run by an ordinary
// user (run's user_ns boxes: no cgroups, a network namespace each), the state is a directory of
// this run's under that one (daemon/mcp_instance_dir.hpp), and the run home is the account's.
//
// Runs on: the main thread of agentbox-serve, before any other thread exists.
#include "cli/run_command.hpp"

namespace agentbox::daemon {

// Returns the exit status (0 when stdin ended). Throws UsageError for bad options.
int serve_mcp_stdio(const cli::RunOptions& options);

}  // namespace agentbox::daemon
