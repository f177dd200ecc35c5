#pragma once
// `agentbox run`: a one-shot box for one person, no server (the bubblewrap-wrapper use case).
#include <optional>
#include <string>
#include <vector>

#include "cli/run_egress.hpp"

namespace agentbox::cli {

struct RunOptions {
  std::vector<std::string> command;       // after "--"
  bool shell = false;                     // start the box user's login shell instead
  std::optional<std::string> home;        // host dir shown as ~ (default ~/.agentbox-home)
  std::vector<std::string> binds;         // SRC[:DST], read-write
  std::vector<std::string> ro_binds;      // SRC[:DST], read-only
  bool cwd = false;                       // bind the current directory read-write, start there
  std::optional<std::string> memory;      // "2G"
  std::optional<std::string> pids;        // "512"
  std::optional<std::string> cpu;         // "1.5" cores or "500m"
  std::optional<std::string> ptys;        // "256": the box's devpts max=
  std::optional<std::string> tcp_memory;  // "64M": its TCP socket buffers (cgroup v1 kmem.tcp)
  std::string net = "none";
  RunNetFlags net_flags;               // --allow-net, --allow-address, --add-host
  std::vector<std::string> env;        // K=V set inside
  std::vector<std::string> pass_env;   // names passed through from the caller
  std::optional<std::string> profile;  // profile file (default ~/.config/agentbox/run.toml)
  bool no_profile = false;
};

// Runs the command in a fresh box and returns the exit code agentbox should exit with: the
// command's own code, 128+N if it died of signal N, 125 if the box could not be made, 126/127
// if the command could not be executed / found. Bad options throw UsageError (exit 2).
int run_in_box(const RunOptions& opts);

}  // namespace agentbox::cli
