#pragma once
// The command-line options of `agentbox run` and `agentbox mcp`: the box's options (home, binds,
// limits, network, environment, profile) are the same for both, defined once here.
#include <CLI/CLI.hpp>

#include "cli/run_command.hpp"

namespace agentbox::cli {

// The box's: --home, --bind, --ro-bind, --memory, --pids, --cpu, --ptys, --tcp-memory, --net,
// --allow-net, --allow-address, --add-host, --env, --pass-env, --profile, --no-profile.
void add_box_options(CLI::App& app, RunOptions& o);

// `agentbox run`'s: --shell, the box's, --cwd and the command.
void add_run_options(CLI::App& run, RunOptions& o);

}  // namespace agentbox::cli
