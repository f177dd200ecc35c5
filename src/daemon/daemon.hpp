#pragma once
// The daemon: every room composed in one written order (as Beast's examples build their shared
// state and listener in main, nothing else). The members below are built in the order they are
// declared, each after what it uses; a comment says why each must outlive those after it. stop()
// is the shutdown, written as one list (daemon.cpp), before the members go in reverse order.
//
//   Daemon daemon(config, options);  // everything made; nothing served yet
//   daemon.run();                    // serves until SIGTERM or SIGINT (SIGHUP reloads)
//   daemon.stop();                   // the shutdown, in order
//
// Runs on: the main thread (constructor, run(), stop()); every other thread it starts is named
// and listed in docs/ARCHITECTURE.md "Threads".
#include <signal.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "accounts/creation_rate.hpp"
#include "accounts/directory.hpp"
#include "accounts/move_gate.hpp"
#include "accounts/restore_gate.hpp"
#include "accounts/trash_upkeep.hpp"
#include "agent/claude_runner.hpp"
#include "agent/images.hpp"
#include "api/services.hpp"
#include "backup/mirror_service.hpp"
#include "box/box_manager.hpp"
#include "box/cgroup.hpp"
#include "config/profile_table.hpp"
#include "config/server_config.hpp"
#include "daemon/readiness.hpp"
#include "daemon/serve.hpp"
#include "daemon/startup.hpp"
#include "exec/account_boxes.hpp"
#include "exec/notebook_kernels.hpp"
#include "exec/process_table.hpp"
#include "exec/terminals.hpp"
#include "http/server.hpp"
#include "metrics/http_requests.hpp"
#include "net/egress_proxy.hpp"
#include "net/inference_gateway.hpp"
#include "net/name_resolver.hpp"
#include "store/account_store.hpp"
#include "store/api_key_store.hpp"
#include "store/chat_sessions.hpp"
#include "store/move_store.hpp"
#include "store/network_log.hpp"
#include "store/process_store.hpp"
#include "store/token_usage.hpp"
#include "util/box_loop.hpp"
#include "util/fair_pool.hpp"
#include "util/terminal_loop.hpp"
#include "volumes/account_volumes.hpp"
#include "volumes/idle_volumes.hpp"

namespace agentbox::daemon {

// SIGINT, SIGTERM (stop) and SIGHUP (reload) blocked in the thread that makes this, so every
// thread started after it inherits the mask and the signals wait for wait().
class StopSignals {
 public:
  StopSignals();
  int wait();  // the next of them to arrive

 private:
  sigset_t set_;
};

struct Daemon {
 public:
  Daemon(ServerConfig config, ServeOptions options);
  ~Daemon();  // stop()
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Listens, serves, and returns at SIGTERM or SIGINT; SIGHUP reloads the egress policy, the
  // profiles (and the cluster file) from the same file and environment.
  void run();
  // `agentbox mcp` (options.local): the MCP tools for the local user over in and out (one JSON-RPC
  // message a line) until in ends or SIGTERM, SIGINT or SIGHUP; nothing listens.
  void serve_stdio(int in, int out);
  // The shutdown (daemon.cpp): what serves stops first, then what it used. Idempotent.
  void stop();

 private:
  void serve_netns(const std::string& account, int netns_fd);
  void serve_own_netns(const std::string& account, pid_t init_pid);
  api::Services services_of();
  http::Router routes() const;
  http::HttpServerOptions http_options();
  void reload();
  bool egress_on() const;
  void start_audit();
  std::string metrics_page();
  void start_idle_volumes();
  std::optional<std::set<std::string>> accounts_with_boxes(std::chrono::seconds wait);
  http::Router metrics_routes();

  // ---- What this daemon is: settled before anything is made, kept to the end ------------------
  const ServeOptions options_;
  const ServerConfig config_;
  // Root, the uid range (locked: held until the last member is gone), the keys, the cluster node.
  Startup startup_;
  // Claude Code and the skills sealed into images before any box binds them.
  agent::AgentImages agent_images_;
  std::unique_ptr<CgroupDriver> cgroups_;  // null: `agentbox mcp` as an ordinary user (no cgroup)

  // ---- The state: outlives every thread that reads or writes it -----------------------------
  AccountStore accounts_;
  // Every account's files, in a volume of its own mounted on first use; unmounted when the last
  // holder (the directory, the process table) has gone, after every box.
  std::shared_ptr<AccountVolumes> volumes_;
  ProcessStore process_store_;
  ChatSessions chat_sessions_;
  std::optional<MoveStore> move_store_;  // a cluster node's
  // Per-user API keys: stored, and loaded once into the map requests are checked against.
  ApiKeyStore api_keys_;
  std::shared_ptr<http::UserKeys> user_keys_;

  // ---- Threads from here: each inherits the blocked stop signals -----------------------------
  StopSignals signals_;
  // The writers: egress decisions and model tokens, stored by a thread each. Held by the egress
  // proxy's and the gateway's sessions, so they outlive the box loop.
  std::shared_ptr<NetworkLog> network_log_;
  std::shared_ptr<TokenLedger> token_ledger_;  // with a model credential
  // Name lookups for the proxy and the gateway, fair per account ("resolver").
  std::shared_ptr<net::NameResolver> resolver_;
  // The box loop ("box-loop"): box owners, processes, the egress proxy and the gateway. It
  // outlives everything that posts to it.
  BoxLoop loop_;
  std::shared_ptr<net::EgressContext> egress_context_;
  net::EgressProxy egress_;
  std::optional<net::InferenceGateway> gateway_;  // with a model credential
  // The API's io context and the terminals' loop ("terminals") outlive the box manager: boxes
  // stopped as it goes end their terminals' shells, which posts to the terminals' loop
  // (ThreadSanitizer found the use-after-free when the io context went first).
  boost::asio::io_context http_io_;
  TerminalLoop terminal_loop_;
  // One box per account; its launchers ("launcher"). Outlives what spawns in boxes.
  BoxManager manager_;

  // ---- Accounts: who a request is for, and whether it may be served here ----------------------
  // The gates the directory's admission reads (accounts/admission.hpp): before it.
  accounts::RestoreGate restore_gate_;
  std::optional<accounts::MoveGate> move_gate_;  // a cluster node's
  accounts::CreationRate creation_rate_;         // [accounts] new_per_minute
  accounts::AccountDirectory callers_;
  accounts::TrashUpkeep trash_upkeep_;  // "trash-upkeep"
  // Detaches the volumes nothing uses ([accounts] volume_idle, attached): with loop images only.
  std::optional<IdleVolumes> idle_volumes_;  // "idle-volumes"

  // ---- What runs in the boxes: uses the boxes and the callers, so it comes after them ---------
  exec::AccountBoxes boxes_;
  exec::ProcessTable processes_;
  exec::Terminals terminals_;
  agent::ClaudeRunner claude_;
  exec::NotebookKernels notebooks_;                // the kernels of /notebooks, commands in processes_
  std::shared_ptr<FairPool> file_pool_;            // "files": the routes' blocking work
  std::unique_ptr<backup::MirrorService> mirror_;  // "mirror", with [backup] dir

  // ---- What /metrics and /health/ready read: the routes hold them, so before the API ----------
  std::shared_ptr<metrics::HttpRequestMetrics> http_metrics_ = std::make_shared<metrics::HttpRequestMetrics>();
  Readiness readiness_{[this] { (void)accounts_.count(); }, config_.state_dir, loop_};

  // ---- The API: last, so it is the first to stop ----------------------------------------------
  // The profiles in force (/p/{profile}), replaced on SIGHUP; the routes hold it too.
  std::shared_ptr<ProfileTable> profiles_;
  api::Services services_;
  http::HttpServer http_;  // "api"
  // "metrics": [metrics] listen, made by run()
  std::unique_ptr<http::HttpServer> metrics_http_;
  bool stopped_ = false;
};

}  // namespace agentbox::daemon
