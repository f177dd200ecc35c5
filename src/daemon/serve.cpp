#include "daemon/serve.hpp"

#include <linux/capability.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>

#include <spdlog/spdlog.h>

#include "accounts/directory.hpp"
#include "accounts/move_gate.hpp"
#include "accounts/placement_guard.hpp"
#include "accounts/restore_gate.hpp"
#include "accounts/trash_upkeep.hpp"
#include "agent/images.hpp"
#include "api/proxy.hpp"
#include "api/routes.hpp"
#include "api/services.hpp"
#include "backup/mirror_service.hpp"
#include "box/agent_paths.hpp"
#include "box/box_manager.hpp"
#include "box/cgroup.hpp"
#include "box/start_steps.hpp"
#include "box/uid_range_guard.hpp"
#include "config/server_config.hpp"
#include "config/units.hpp"
#include "exec/account_boxes.hpp"
#include "exec/process_table.hpp"
#include "http/server.hpp"
#include "http/signed_links.hpp"
#include "net/egress_listener.hpp"
#include "net/egress_proxy.hpp"
#include "net/inference_gateway.hpp"
#include "store/account_store.hpp"
#include "store/chat_sessions.hpp"
#include "store/move_store.hpp"
#include "store/network_log.hpp"
#include "store/process_store.hpp"
#include "store/schema.hpp"
#include "util/box_loop.hpp"
#include "util/capabilities.hpp"
#include "util/error.hpp"
#include "util/terminal_loop.hpp"
#include "volumes/account_volumes.hpp"

namespace agentbox::daemon {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
using namespace agentbox::api;   // the routes it registers

namespace {

constexpr const char* kVersion = "0.1.0";

ServerConfig load_config(const ServeOptions& o) {
  ServerConfig config;
  try {
    config = load_server_config(o.config);
    if (o.listen) config.listen = *o.listen;
    if (o.state) config.state_dir = *o.state;
    config.state_dir = absolute_path(config.state_dir);
    parse_listen_address(config.listen);  // fail here, not after the state is set up
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return config;
}

// The variables that may hold a credential are wiped once read: the bytes themselves (a
// process's initial environment stays readable in /proc/PID/environ after unsetenv), then the
// variables, so nothing the daemon starts can inherit them.
void wipe_environment(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (char* value = ::getenv(name)) std::fill(value, value + std::strlen(value), 'x');
    ::unsetenv(name);
  }
}

// Claude Code for the boxes: a CLI that is not there means no agent, said once; a skills_dir
// that is not a directory is an error (a typo must not silently give no skills).
exec::AgentMounts find_agent(const AgentConfig& agent) {
  exec::AgentMounts mounts;
  try {
    if (std::optional<std::string> skills = find_skills_dir(agent)) mounts.skills_dir = *skills;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  std::string why;
  if (std::optional<std::string> claude = find_claude(agent, &why)) {
    mounts.claude = *claude;
    std::cout << "agent: Claude Code " << mounts.claude << " in every box as " << kClaudeInBox
              << (mounts.skills_dir.empty() ? "" : ", skills from " + mounts.skills_dir) << "\n";
  } else {
    std::cout << "agent: none: " << why << "\n";
  }
  return mounts;
}

void require_strong_key(const char* what, const std::string& key, const std::string& listen) {
  try {
    require_key_strength(what, key, listen);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// --cluster FILE --node NAME: this daemon is that node, and refuses users it does not own.
std::unique_ptr<accounts::PlacementGuard> placement_of(const ServeOptions& options) {
  if (!options.cluster && !options.node) return nullptr;
  if (!options.cluster) throw UsageError("--node needs --cluster FILE (the cluster it is a node of)");
  if (!options.node) throw UsageError("--cluster needs --node NAME (this node's name in " + *options.cluster + ")");
  try {
    return std::make_unique<accounts::PlacementGuard>(*options.cluster, *options.node);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

// Every long-poll and stream holds a connection: allow as many descriptors as the hard limit.
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

int serve(const ServeOptions& options) {
  ServerConfig config = load_config(options);
  if (::geteuid() != 0)
    throw UsageError("serve must run as root: it gives every user their own uid (for one person without a server, use `agentbox run`)");
  // The uid range is this daemon's alone (box/uid_range_guard.hpp), settled before anything
  // is created in the state directory; the lock is held until serve returns.
  const IdSpan uid_range{config.accounts.uid_base, config.accounts.uid_count};
  if (std::optional<std::string> conflict = host_uid_range_conflict(uid_range)) throw UsageError(*conflict);
  UidRangeLock uid_range_lock = UidRangeLock::acquire(uid_range, config.state_dir);
  ListenAddress addr = parse_listen_address(config.listen);
  std::unique_ptr<accounts::PlacementGuard> placement = placement_of(options);
  // Keys given in the config or the environment: refused before anything else is said or made.
  if (config.api_key) require_strong_key("API key", *config.api_key, config.listen);
  if (config.admin_key) require_strong_key("admin key", *config.admin_key, config.listen);
  exec::AgentMounts agent_mounts = find_agent(config.agent);
  std::optional<net::Credential> model_credential;
  try {
    model_credential = load_anthropic_credential(config.inference, ::getenv);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  wipe_environment({kCredentialVariables[0], kCredentialVariables[1], "AGENTBOX_API_KEY", "AGENTBOX_ADMIN_KEY"});
  raise_fd_limit();
  // Root's reserved blocks and any quota are out of reach of everything the daemon writes for
  // an account (uploads, logs, spool) from here on, in every thread it starts (DESIGN §8).
  drop_capability(CAP_SYS_RESOURCE);

  if (::mkdir(config.state_dir.c_str(), 0700) == -1 && errno != EEXIST)
    throw sys_error("mkdir(" + config.state_dir + ")");
  std::string api_key;
  if (config.api_key) {
    api_key = *config.api_key;
    std::cout << "API key: from AGENTBOX_API_KEY or the config file\n";
  } else {
    api_key = load_or_create_api_key(config.state_dir);
    std::cout << "API key: in " << config.state_dir << "/api_key (mode 0600)\n";
  }
  // The operator's key for /admin/ routes: a secret of its own, never the API key.
  std::string admin_key;
  if (config.admin_key) {
    admin_key = *config.admin_key;
    std::cout << "admin key: from AGENTBOX_ADMIN_KEY or the config file\n";
  } else {
    admin_key = load_or_create_state_secret(config.state_dir, "admin_key");
    std::cout << "admin key: in " << config.state_dir << "/admin_key (mode 0600)\n";
  }
  if (admin_key == api_key) throw UsageError("the admin key is the same as the API key: give admin_key a secret of its own");
  for (const auto& [what, key] : {std::pair{"API key", &api_key}, std::pair{"admin key", &admin_key}}) {
    require_strong_key(what, *key, config.listen);  // a key file an operator wrote
    if (auto warning = short_key_warning(what, *key)) std::cout << "warning: " << *warning << "\n";
  }
  for (const std::string& warning : config_warnings(config)) std::cout << "warning: " << warning << "\n";

  // Before any box: the CLI and the skills as sealed images, so boxes bind them without
  // learning where the host keeps them (agent/images.hpp).
  agent::AgentImages agent_images(agent_mounts, config.state_dir);
  agent_mounts = agent_images.mounts();

  std::string why;
  std::unique_ptr<CgroupDriver> cgroups = CgroupDriver::detect("/sys/fs/cgroup", &why);
  if (!cgroups) throw Error("cgroups: " + why + " (see `agentbox doctor`)");

  AccountStore accounts(open_state_db(config.state_dir),
                        UidRange{config.accounts.uid_base, config.accounts.uid_count});
  // Every account's files live in its own volume: an image of its disk quota, mounted on first use.
  auto volumes = std::make_shared<AccountVolumes>(
      config.state_dir, make_volume_backend(config.storage.quotas()),
      [&accounts, storage = config.storage](const std::string& name) {
        std::optional<Account> account = accounts.find_by_name(name);
        StorageConfig::Quota q = storage.quota_for(account ? account->external_id : std::string());
        return DiskQuota{q.disk_bytes, q.inodes};
      });
  std::cout << "storage: " << volumes->backend().describe();
  if (config.storage.quotas())
    std::cout << ", " << format_size(config.storage.quota.disk_bytes) << " and " << config.storage.quota.inodes
              << " inodes per account";
  std::cout << ", trash kept " << config.storage.trash_days << " days\n";
  ProcessStore processes(open_state_db(config.state_dir));

  // Optional steps that fall back (box/start_steps.hpp) say so once, in the log.
  set_step_report_sink([](const StartStepInfo& step, std::string_view reason) {
    spdlog::warn("{} unavailable ({}); instead {}", step.name, reason, step.without);
  });

  // Block the stop signals in every thread (the loop and io threads inherit the mask, so
  // they must come after) and wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // not a stop: reloads the egress policy
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // The box loop: every box's owner and every process's output, waits and timers.
  BoxLoop loop;

  // The egress proxy: a listener in each account's network namespace, made with the namespace.
  auto network_log = std::make_shared<NetworkLog>(open_state_db(config.state_dir),
                                                  std::chrono::hours(24) * config.egress_proxy.log_days,
                                                  NetworkLog::kDefaultQueueLimit, config.egress_proxy.log_rows);
  net::EgressLimits egress_limits;
  egress_limits.connections_per_account = config.egress_proxy.connections;
  egress_limits.connect_rate = config.egress_proxy.connect_rate;
  egress_limits.socket_buffer = config.egress_proxy.socket_buffer;
  egress_limits.connect_timeout = config.egress_proxy.connect_timeout;
  egress_limits.idle_timeout = config.egress_proxy.idle_timeout;
  egress_limits.tunnel_idle_timeout = config.egress_proxy.tunnel_idle_timeout;
  // Names are looked up off the loop, fairly between accounts (net/name_resolver.hpp).
  auto name_resolver = std::make_shared<net::NameResolver>();

  auto egress_context = std::make_shared<net::EgressContext>(std::make_shared<const net::EgressConfig>(config.egress),
                                                             egress_limits, network_log, name_resolver);
  net::EgressProxy egress(loop.context(), egress_context);

  // The inference gateway, when the operator gave a model credential: a listener beside the
  // proxy's in each namespace; the tokens it counts are kept per account and day.
  std::shared_ptr<TokenLedger> token_ledger;
  std::optional<net::InferenceGateway> gateway;
  if (model_credential) {
    token_ledger = std::make_shared<TokenLedger>(open_state_db(config.state_dir));
    net::GatewayOptions g;
    g.upstream = config.inference.anthropic.upstream;
    g.credential = std::move(*model_credential);
    g.ca_file = config.inference.anthropic.ca_file;
    g.daily_tokens = config.inference.anthropic.daily_tokens;
    g.context_tokens = config.inference.anthropic.context_tokens;
    g.request_memory = config.inference.request_memory;
    g.connect_timeout = config.inference.connect_timeout;
    g.idle_timeout = config.inference.idle_timeout;
    g.connections_per_account = config.inference.connections;
    std::cout << "model gateway: " << g.upstream.to_string() << " with " << g.credential.describe() << "\n";
    gateway.emplace(loop.context(),
                    std::make_shared<net::GatewayContext>(std::move(g), name_resolver, token_ledger, network_log));
  }

  BoxManagerOptions box_options;
  box_options.on_netns_created = [&egress, &gateway, &accounts, &config](const std::string& account, int netns_fd) {
    std::optional<Account> known = accounts.find_by_name(account);
    std::string user = known ? known->external_id : std::string();
    try {
      egress.serve(net::listen_in_netns(netns_fd, config.egress_proxy.port), account, user);
    } catch (const std::exception& e) {
      spdlog::warn("egress proxy for {}: {} (its box has no network)", account, e.what());
    }
    if (!gateway) return;
    try {
      gateway->serve(net::listen_in_netns(netns_fd, config.inference.port), account, user);
    } catch (const std::exception& e) {
      spdlog::warn("model gateway for {}: {} (its box cannot reach the model)", account, e.what());
    }
  };
  box_options.on_netns_released = [&egress, &gateway](const std::string& account) {
    egress.stop(account);
    if (gateway) gateway->stop(account);
  };
  box_options.cgroups = cgroups.get();
  box_options.idle_timeout = config.accounts.idle_timeout;
  box_options.netns_linger = config.accounts.idle_timeout;
  box_options.start_timeout = config.accounts.start_timeout;
  box_options.max_active = config.accounts.max_active;
  if (const char* held = ::getenv("AGENTBOX_TEST_HOLD_START"); held && *held) {
    // Test hook (tests/e2e): boxes of accounts whose external id starts with this never
    // answer their start, so a test can show one stuck account harms no other.
    box_options.hold_start = [&accounts, prefix = std::string(held)](const std::string& name) {
      auto account = accounts.find_by_name(name);
      return account && account->external_id.starts_with(prefix);
    };
  }
  // The API's io threads run on http_io. Terminals have a loop of their own, where each pty and
  // the WebSockets attached to it are served: a keystroke in and its echo out cost one wake-up
  // each (bench/RESULTS.md). Both are made before the box manager so they outlive it: boxes
  // stopped as the manager goes end their terminals' shells, which posts to the terminals'
  // loop (ThreadSanitizer found the use-after-free when the io_context went first).
  boost::asio::io_context http_io;
  TerminalLoop terminal_loop("terminals");
  BoxManager manager(loop, std::move(box_options));

  accounts::AccountDirectory callers(accounts, config.state_dir, {.open_homes = config.accounts.open_homes}, volumes);
  if (placement) {
    callers.set_new_account_check([&guard = *placement](std::string_view user) { guard.check_new(user); });
    const ClusterNode& self = placement->placement()->self();
    std::cout << "cluster: node " << self.name << " (" << self.server << ") of " << *options.cluster << ", "
              << placement->placement()->config().nodes.size() << " nodes, "
              << placement->placement()->config().pins.size() << " pins\n";
  }
  // Moves between nodes (api/moves.hpp): users being moved or moved away are refused
  // before anything else looks at them.
  std::optional<MoveStore> moves;
  std::optional<accounts::MoveGate> move_gate;
  // Users being restored from the mirror (accounts/restore_gate.hpp) are refused the same way.
  accounts::RestoreGate restore_gate(config.state_dir + "/restoring");
  if (placement) {
    moves.emplace(open_state_db(config.state_dir));
    move_gate.emplace(*moves, placement->node());
  }
  callers.set_account_gate([&restore_gate, gate = move_gate ? &*move_gate : nullptr](std::string_view user) {
    restore_gate.check(user);
    if (gate) gate->check(user);
  });
  if (placement) {
    if (::mkdir((config.state_dir + "/moves").c_str(), 0700) != 0 && errno != EEXIST)
      throw sys_error("mkdir(" + config.state_dir + "/moves)");
  }
  accounts::TrashUpkeep trash_upkeep(callers, accounts, config.storage.trash_days);
  exec::AccountBoxes boxes(manager, config.state_dir, config.box,
                           {.egress_proxy = config.egress_proxy.port, .inference = gateway ? config.inference.port : uint16_t{0}},
                           agent_mounts);
  // From the config by the account's own id: a spec is made for every command, so no SQL here.
  boxes.set_file_size_limit([storage = config.storage](const Account& account) {
    return storage.quota_for(account.external_id).disk_bytes;
  });

  exec::ProcessTableOptions table_options;
  // In the account's volume (made by resolving the caller before any command starts).
  table_options.log_dir_of = [volumes](const std::string& account) { return volumes->paths(account).daemon + "/logs"; };
  table_options.output_cap = config.exec.output_cap;
  table_options.retention = config.exec.retention;
  table_options.on_error = [](const std::string& message) { spdlog::warn("{}", message); };
  exec::ProcessTable table(loop, boxes, processes, table_options);
  exec::Terminals terminals(terminal_loop, boxes,
                            {.max_per_account = config.terminals.max_per_account, .idle_timeout = config.terminals.idle_timeout});

  // Claude Code in the caller's box; its download links open without the API key.
  auto links = std::make_shared<const SignedLinks>(load_or_create_state_secret(config.state_dir, "link_key"));
  ChatSessions chat_sessions(open_state_db(config.state_dir));
  agent::ClaudeRunner claude_runner(loop.context(), table);
  auto file_pool = std::make_shared<FairPool>(4, static_cast<unsigned>(config.accounts.file_ops), "files");

  // The mirror of homes, on a thread of its own (started after the stop signals are blocked).
  std::unique_ptr<backup::MirrorService> mirror;
  if (!config.backup.dir.empty()) {
    backup::MirrorServiceOptions m;
    m.dir = config.backup.dir;
    m.interval = config.backup.interval;
    m.keep_deleted_days = static_cast<int>(config.backup.keep_deleted_days);
    m.status_file = config.state_dir + "/backup_status.json";
    m.homes = [&accounts, &restore_gate, state_dir = config.state_dir] {
      std::vector<backup::MirrorHome> homes;
      for (const Account& a : accounts.list())
        if (!restore_gate.restoring(a.external_id))  // its home is not complete: the mirror's copy is the truth
          homes.push_back({a.name, state_dir + "/" + a.home_dir, a.external_id, a.uid, a.created});
      return homes;
    };
    // Only what this node deleted is put away: after a lost disk the mirror waits for a restore.
    m.deleted_here = [&accounts](const std::string& name) { return accounts.was_deleted(name); };
    m.log = [](const std::string& message) { spdlog::warn("{}", message); };
    mirror = std::make_unique<backup::MirrorService>(std::move(m));
    mirror->start();
    std::cout << "backup: mirror of homes in " << config.backup.dir << " every " << config.backup.interval.count()
              << " s, deleted files kept " << config.backup.keep_deleted_days << " days\n";
  }

  // What the routes work with (api/services.hpp), and every route (api/routes.cpp).
  Services services;
  services.accounts = &accounts;
  services.callers = &callers;
  services.manager = &manager;
  services.boxes = &boxes;
  services.processes = &table;
  services.terminals = &terminals;
  services.claude = &claude_runner;
  services.chats = &chat_sessions;
  services.file_pool = file_pool;
  services.network_log = network_log;
  services.tokens = token_ledger;
  services.network_of = [egress_context](const std::string& user) {
    return net::describe_for_box(egress_context->config()->policy_for(user));
  };
  services.links = links;
  services.mirror = mirror.get();
  services.restore_gate = &restore_gate;
  services.placement = placement.get();
  services.moves = moves ? &*moves : nullptr;
  services.move_gate = move_gate ? &*move_gate : nullptr;
  services.version = kVersion;
  services.admin_key = admin_key;
  services.state_dir = config.state_dir;
  services.trash_days = config.storage.trash_days;
  services.daily_tokens = config.inference.anthropic.daily_tokens;
  services.file_options.upload_max_bytes = config.limits.body_bytes;
  services.terminal_options.api_key = api_key;
  services.proxy_options = proxy_options(config.proxy);
  if (placement) services.proxy_options.node_name = placement->node();
  AgentRoutesOptions& agent_options = services.agent_options;
  agent_options.claude_model = config.agent.model;
  agent_options.max_turns = config.agent.max_turns;
  agent_options.max_retries = config.agent.max_retries;
  agent_options.allowed_tools = config.agent.allowed_tools;
  agent_options.public_url = config.agent.public_url;
  agent_options.link_ttl = std::chrono::hours(24) * config.agent.link_days;
  if (agent_mounts.claude.empty())
    agent_options.unavailable = "Claude Code is not installed on this server (see `agentbox doctor`)";
  else if (!gateway)
    agent_options.unavailable =
        "no model credential is configured on this server ([inference.anthropic], AGENTBOX_ANTHROPIC_API_KEY)";
  agent_options.network_of = services.network_of;
  Router router;
  register_routes(router, services);

  HttpServerOptions http;
  // One io thread: the API's sockets all wait in its epoll, and nothing on it
  // blocks (file work goes to the pool). A second thread on the same io_context made every
  // event wake the other thread (~16 futex calls a request): lower latency and higher
  // throughput with one on 2 cores, and half of what nginx adds in front (bench/RESULTS.md).
  http.threads = 1;
  http.api_key = api_key;
  http.admin_key = admin_key;
  http.body_limit = config.limits.body_bytes;
  http.header_timeout = config.limits.header_timeout;
  http.max_connections = config.limits.connections;
  http.max_connections_per_address = config.limits.per_address();
  http.cors_origins = config.cors_origins;
  http.spool_dir = config.state_dir;
  // An upload is received into its account's volume, charged to its quota.
  http.spool_dir_for = [&callers](const Request& req) {
    accounts::Caller caller = callers.resolve(req);
    return callers.volume_of(caller.account).daemon;
  };
  http.links = links;
  if (placement) http.node_name = placement->node();

  HttpServer http_server(std::move(router), http, http_io);
  auto listener = http_server.listen(addr.host, addr.port);
  http_server.start();
  std::string host = addr.host.find(':') != std::string::npos ? "[" + addr.host + "]" : addr.host;
  std::cout << "agentbox " << kVersion << " serving on http://" << host << ":" << listener.port
            << " (state " << config.state_dir << ", cgroup " << cgroups->kind() << ")" << std::endl;

  int sig = 0;
  for (;;) {
    ::sigwait(&stop_signals, &sig);
    if (sig != SIGHUP) break;
    // The policy is read again from the same file and environment; a file with an error
    // changes nothing. Other keys take effect at the next start.
    try {
      ServerConfig fresh = load_config(options);
      egress.set_config(std::make_shared<const net::EgressConfig>(std::move(fresh.egress)));
      spdlog::info("SIGHUP: egress policy reloaded");
      if (placement) {
        placement->reload();
        spdlog::info("SIGHUP: cluster file reloaded ({} pins)", placement->placement()->config().pins.size());
      }
    } catch (const std::exception& e) {
      spdlog::error("SIGHUP: the configuration has errors, the policy stays as it was:\n{}", e.what());
    }
  }
  spdlog::info("signal {}: stopping (finishing requests in flight)", sig);
  http_server.stop();
  if (mirror) mirror->stop();  // a pass under way ends at its next file
  terminals.shut_down();  // no handler of it runs after this
  // The terminals' WebSockets go with their loop, before the terminals they use (they would
  // still read and write while the box manager stops the boxes).
  terminal_loop.stop();
  return 0;
}

}  // namespace agentbox::daemon
