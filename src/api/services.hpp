#pragma once
// Services: what the API's routes work with, in one struct. The daemon (src/daemon/daemon.hpp)
// composes the rooms and fills it once; register_routes() (api/routes.hpp) hands it to every
// feature's add_*_routes, and each handler takes from it what it needs. It holds no feature's
// context of its own: a feature that wants one (files' FileContext) builds it from this.
//
// The services are pointers to what the daemon owns, which outlives the routes (the HTTP server
// stops first). The daemon sets every one; those marked "null when off" stay null when that
// part is not configured. A test sets those the routes it registers use.
//
// Runs on: read-only once the routes are registered; read from any thread.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/agent.hpp"
#include "api/execute.hpp"
#include "api/files.hpp"
#include "api/proxy_session.hpp"
#include "api/terminals.hpp"
#include "box/box_spec.hpp"
#include "util/fair_pool.hpp"

namespace agentbox {
class AccountStore;
class ProfileTable;
class ApiKeyStore;
class BoxManager;
class ChatSessions;
class MoveStore;
class NetworkLog;
class TokenLedger;
namespace accounts {
class AccountDirectory;
class MoveGate;
class PlacementGuard;
class RestoreGate;
}  // namespace accounts
namespace agent {
class ClaudeRunner;
}
namespace backup {
class MirrorService;
}
namespace exec {
class AccountBoxes;
class NotebookKernels;
class ProcessTable;
class Terminals;
}  // namespace exec
namespace http {
class SignedLinks;
class UserKeys;
}  // namespace http
namespace net {
class InferenceGateway;
}
}  // namespace agentbox

namespace agentbox::api {

struct Services {
  // Who is calling: accounts, their homes and volumes (accounts/, store/).
  AccountStore* accounts = nullptr;
  accounts::AccountDirectory* callers = nullptr;
  ApiKeyStore* api_keys = nullptr;            // per-user keys as stored (api/keys.hpp)
  std::shared_ptr<http::UserKeys> user_keys;  // the same in memory, what requests are checked against

  // Boxes and what runs in them (box/, exec/, agent/).
  BoxManager* manager = nullptr;
  exec::AccountBoxes* boxes = nullptr;
  exec::ProcessTable* processes = nullptr;
  exec::Terminals* terminals = nullptr;
  agent::ClaudeRunner* claude = nullptr;
  ChatSessions* chats = nullptr;
  exec::NotebookKernels* notebooks = nullptr;  // null when off: no /notebooks routes

  // Work that blocks (file I/O, SQLite, zips, moves) runs here, fair per account (http/offload.hpp).
  std::shared_ptr<FairPool> file_pool;

  // The network: each account's egress decisions, its model tokens, what its box may reach.
  std::shared_ptr<NetworkLog> network_log;
  std::shared_ptr<TokenLedger> tokens;  // null when off (no model gateway)
  std::function<std::string(const std::string& user, const std::string& profile)>
      network_of;  // net::describe_for_box of a user's policy under a profile ("" the default)
  std::shared_ptr<const http::SignedLinks> links;  // the agent's download links
  net::InferenceGateway* gateway = nullptr;        // null when off (no model credential)

  // Backup, restore and the cluster.
  backup::MirrorService* mirror = nullptr;  // null when off (no [backup] dir)
  accounts::RestoreGate* restore_gate = nullptr;
  accounts::PlacementGuard* placement = nullptr;  // null when off (not a cluster node)
  MoveStore* moves = nullptr;                     // null when off (not a cluster node)
  accounts::MoveGate* move_gate = nullptr;        // null when off (not a cluster node)

  // What the routes are told (from the configuration).
  std::string version;        // GET /openapi.json
  std::string admin_key;      // a cluster's nodes share it: the move protocol speaks it
  std::string state_dir;      // STATE/moves holds the records of moves being sent
  uint32_t trash_days = 30;   // how long the trash keeps what is deleted
  uint64_t daily_tokens = 0;  // each account's model budget per day (0: none)
  FileRoutesOptions file_options;
  ExecuteRoutesOptions execute_options;
  TerminalRoutesOptions terminal_options;  // with the API key a terminal's auth frame must carry
  ProxyOptions proxy_options;
  AgentRoutesOptions agent_options;
  std::string skills_dir;  // the operator's skills ([agent] skills_dir, as sealed for the boxes); "" for none

  // Profiles: /p/{profile}/... (api/profiles.hpp); null: no prefix is taken. What a box gets
  // without one: [box]'s limits, [accounts] idle_timeout (GET /usage reports them).
  std::shared_ptr<ProfileTable> profiles;
  Limits box_limits;
  std::chrono::seconds idle_timeout{900};
  // GET /metrics: the Prometheus page (daemon/metrics_page.hpp); unset: the route is 404.
  std::function<std::string()> metrics_page;
  // GET /health/ready: "" when ready, else the part that is not (daemon/readiness.hpp).
  std::function<std::string()> readiness;
  // [accounts] forget_after_days (0: never) and the clock days are counted by (a test's:
  // daemon.cpp days_clock): GET /admin/accounts?stale reads both.
  uint32_t forget_after_days = 0;
  std::function<int64_t()> days_now;
};

}  // namespace agentbox::api
