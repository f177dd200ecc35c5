#pragma once
// What `agentbox serve` settles before it builds anything (daemon/daemon.hpp): the checks that
// refuse a start (not root, a uid range another daemon holds, a weak key, a bad cluster file),
// the secrets read once (the keys, the model credential) with the environment that carried them
// wiped, and the host's limits for the process. settle() does it in one written order.
//
// Runs on: the main thread, before any other thread exists.
#include <memory>
#include <optional>
#include <string>

#include "accounts/placement_guard.hpp"
#include "box/uid_range_guard.hpp"
#include "config/server_config.hpp"
#include "daemon/serve.hpp"
#include "exec/account_boxes.hpp"
#include "net/inference_upstream.hpp"

namespace agentbox::daemon {

// The configuration file and the command line, merged. Throws UsageError for any error in them.
ServerConfig load_config(const ServeOptions& options);

struct Startup {
  ListenAddress address;                                // where the API listens
  std::optional<UidRangeLock> uid_range;                // held until the daemon is gone; none: local
  std::unique_ptr<accounts::PlacementGuard> placement;  // this node of --cluster; null: no cluster
  std::string api_key, admin_key;                       // never one another
  exec::AgentMounts agent;                              // the host's Claude Code and skills; empty: none
  std::optional<net::Credential> model_credential;      // none: no model gateway
};

// In this order: must run as root; the uid range is this daemon's alone (locked before anything
// is made in the state directory); the cluster node; keys given in the config or environment
// checked; Claude Code found; the model credential read, then every variable that may hold a
// secret wiped; the descriptor limit raised; CAP_SYS_RESOURCE dropped (root's reserve and
// quotas out of reach of all the daemon writes for accounts); the state directory made; the API
// and admin keys read or made there; warnings said; the box starts' fallbacks reported to the
// log. Throws UsageError (exit 2) for what the operator must fix.
Startup settle(const ServerConfig& config, const ServeOptions& options);

// The same for `agentbox mcp` (options.local): root still (host uids; checked by the caller);
// no uid range of its own (its one box is `agentbox run`'s uid, shared as run shares it), no
// cluster, no Claude Code or model credential; keys made in the private state directory.
Startup settle_local(const ServerConfig& config);

}  // namespace agentbox::daemon
