#pragma once
// The `agentbox run` profile (TOML, default ~/.config/agentbox/run.toml): what a person always
// wants in their sandbox, so the command line stays short.
//
//   ro_bind = ["~/.opam", "/data/ref:/ref"]   # SRC[:DST], ~ = the caller's real home
//   bind = ["~/src/project"]
//   pass_env = ["ANTHROPIC_API_KEY"]          # passed through from the caller's environment
//   home = "~/.agentbox-home"                 # host directory shown as the box's home
//   [env]
//   KEY = "value"                             # set inside
//   [limits]
//   memory = "2G"
//   pids = 512
//   cpu = "1.5"
//   ptys = 256                                # pseudo-terminals the box may hold (devpts max=)
//   tcp_memory = "64M"                        # its TCP socket buffers (cgroup v1; root only)
//   [policy.default]                          # egress through the proxy, as in the server config
//   allow = ["pypi.org", "*.pythonhosted.org"]  # no allow rule: no proxy, no network
//   deny = []
//   allow_addresses = []                      # CIDRs of private/loopback places that may be reached
//   [hosts]
//   "dev.test" = "127.0.0.1"                  # static name -> address, before DNS
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "box/box_spec.hpp"
#include "net/egress_policy.hpp"

namespace agentbox {

struct RunProfile {
  std::vector<BindMount> binds;              // ro_bind entries first, then bind; sources expanded
  std::vector<std::string> pass_env;         // variable names
  std::map<std::string, std::string> env;    // set inside the box
  std::optional<uint64_t> memory_bytes;      // limits.memory
  std::optional<uint64_t> pids;              // limits.pids
  std::optional<uint32_t> cpu_millicores;    // limits.cpu
  std::optional<uint32_t> ptys;              // limits.ptys
  std::optional<uint64_t> tcp_memory_bytes;  // limits.tcp_memory
  std::optional<std::string> home;           // absolute host path, ~ expanded
  net::EgressConfig egress;                  // [policy.default] and [hosts]; users stays empty
};

// caller_home/.config/agentbox/run.toml
std::string default_run_profile_path(const std::string& caller_home);

// Loads the profile at path. A missing file is an empty profile; an unreadable or invalid one
// throws agentbox::Error listing every problem, one per line, each naming the file and key:
// `run.toml: unknown key "limitz" (line 3)`. Bind sources must exist (see parse_bind_spec).
RunProfile load_run_profile(const std::string& path, const std::string& caller_home);

}  // namespace agentbox
