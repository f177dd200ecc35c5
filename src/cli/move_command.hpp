#pragma once
// `agentbox accounts move USER --to NODE --cluster FILE [--router-dir DIR]`: asks the node that
// holds USER (its pin, else the ring; or --from) to move the account to NODE
// (api/moves.hpp), then pins USER to NODE in the cluster's pins file and, with
// --router-dir, rewrites the router's pins.map and reloads nginx (SIGHUP to DIR/nginx.pid).
// Every step is safe to repeat: running the same command again finishes an interrupted move.
#include <optional>
#include <string>

#include "cli/admin_client.hpp"

namespace agentbox::cli {

struct MoveOptions {
  AdminTargetOptions target;  // where the admin key is (--config, --state; or AGENTBOX_ADMIN_KEY)
  std::string user;           // the user id (the front end's), as nginx hashes it
  std::string to;
  std::string cluster;
  std::optional<std::string> from;        // the node holding USER, when not its owner
  std::optional<std::string> router_dir;  // `cluster nginx-conf --out DIR` of a running nginx
};

// Prints one line per step; AdminError (one line) for anything refused.
int move_account(const MoveOptions& options);

}  // namespace agentbox::cli
