#pragma once
// The box `agentbox run` makes, as data: the caller, the profile (~/.config/agentbox/run.toml,
// --profile, --no-profile), the BoxSpec the flags and profile give (home, binds, limits,
// identity), its network rules and the variables set in it. `agentbox run` starts one such box
// for one command; `agentbox mcp` serves the MCP tools on boxes of the same spec.
//
// Runs on: the main thread, before any other starts.
#include <map>
#include <optional>
#include <string>

#include "box/box_spec.hpp"
#include "cli/run_command.hpp"
#include "config/run_profile.hpp"
#include "net/egress_policy.hpp"

namespace agentbox::cli {

struct RunBox {
  std::string caller_home;  // the caller's own $HOME (hidden from the box)
  RunProfile profile;
  BoxSpec spec;
  std::optional<net::EgressConfig> egress;  // nullopt: no network (only the box's loopback)
  // --env, --pass-env and the profile's: set over every command's base environment.
  std::map<std::string, std::string> env;
};

// Throws UsageError for a bad flag or profile (exit 2). Sets spec.egress_proxy_port when the
// box has a network.
RunBox make_run_box(const RunOptions& o);

// The spec's home, made on first use (0700, owned by the box's uid when it is a host uid).
void ensure_run_home(const BoxSpec& spec);

}  // namespace agentbox::cli
