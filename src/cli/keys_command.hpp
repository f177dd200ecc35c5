#pragma once
// `agentbox keys create|list|revoke`: per-user API keys, through the running daemon's
// /admin/keys routes (api/keys.hpp, cli/admin_client.hpp). create prints the key once: the
// daemon keeps only its SHA-256.
#include <optional>
#include <string>

#include "cli/admin_client.hpp"

namespace CLI {
class App;
}

namespace agentbox::cli {

struct KeysOptions {
  AdminTargetOptions target;
  bool json = false;                // create, list: the daemon's JSON as is
  std::string user;                 // create: the external user id the key acts as
  std::optional<std::string> name;  // create: a label
  std::string id;                   // revoke
};

// Adds the subcommands and options of `keys` to it; run_keys() runs whichever was parsed.
void add_keys_options(CLI::App& keys, KeysOptions& options);
int run_keys(CLI::App& keys, const KeysOptions& options);

}  // namespace agentbox::cli
