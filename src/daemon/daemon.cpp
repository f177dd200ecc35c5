#include "daemon/daemon.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "accounts/account_forgetting.hpp"
#include "accounts/workspace_sweep.hpp"
#include "agent/warm_clis.hpp"
#include "api/health.hpp"
#include "api/metrics.hpp"
#include "api/proxy.hpp"
#include "api/routes.hpp"
#include "box/cgroup_orphans.hpp"
#include "config/units.hpp"
#include "daemon/audit_requests.hpp"
#include "daemon/metrics_page.hpp"
#include "http/signed_links.hpp"
#include "http/user_keys.hpp"
#include "mcp/mcp_routes.hpp"
#include "net/egress_listener.hpp"
#include "store/box_key.hpp"
#include "store/schema.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace agentbox::daemon {

namespace {

constexpr const char* kVersion = "0.1.0";
// Threads for file work, all accounts together; each account may hold [accounts] file_ops.
constexpr unsigned kFileThreads = 4;

// Every account's files live in its own volume: an image of its disk quota, mounted on first
// use; a few are made ahead for new accounts (volumes/spare_volumes.hpp).
std::shared_ptr<AccountVolumes> make_volumes(const ServerConfig& config, AccountStore& accounts) {
  SparePolicy spares{.count = config.accounts.spare_volumes,
                     .quota = {config.storage.quota.disk_bytes, config.storage.quota.inodes}};
  auto volumes = std::make_shared<AccountVolumes>(
      config.state_dir, make_volume_backend(config.storage.quotas(), std::move(spares)),
      [&accounts, storage = config.storage](const std::string& name) {
        std::optional<Account> account = accounts.find_by_name(name);
        StorageConfig::Quota q = storage.quota_for(account ? account->external_id : std::string());
        return DiskQuota{q.disk_bytes, q.inodes};
      });
  if (const char* held = ::getenv("AGENTBOX_TEST_HOLD_VOLUME"); held && *held) {
    // Test hook (tests/e2e): the volumes of accounts whose external id starts with this take
    // 5 s longer to prepare, so a test can show a slow first request delays no other user's.
    volumes->set_hold([&accounts, prefix = std::string(held)](const std::string& name) {
      auto account = accounts.find_by_name(name);
      if (account && account->external_id.starts_with(prefix)) std::this_thread::sleep_for(std::chrono::seconds(5));
    });
  }
  std::cout << "storage: " << volumes->backend().describe();
  if (config.storage.quotas())
    std::cout << ", " << format_size(config.storage.quota.disk_bytes) << " and " << config.storage.quota.inodes
              << " inodes per account, " << config.accounts.spare_volumes << " made ahead";
  std::cout << ", trash kept " << config.storage.trash_days << " days\n";
  return volumes;
}

// How often the trash upkeep runs (a minute). Test hook (tests/e2e/test_storage.py):
// AGENTBOX_TEST_TRASH_UPKEEP_SECONDS, so a test that fills a volume on purpose is not raced by a
// pass that makes room while it is full.
std::chrono::seconds trash_upkeep_interval() {
  if (const char* s = ::getenv("AGENTBOX_TEST_TRASH_UPKEEP_SECONDS"); s && *s)
    return std::chrono::seconds(std::atoi(s));
  return std::chrono::seconds(60);
}

// The clock of what counts in days (unix seconds): the workspaces' sweep, the forgetting of
// stale accounts and `accounts list --stale`. Test hook (tests/e2e/test_workspaces.py,
// test_forget_accounts.py): the unix time written in the file AGENTBOX_TEST_WORKSPACE_CLOCK
// names, when it holds one, so a test moves days ahead at once.
std::function<int64_t()> days_clock() {
  const char* file = ::getenv("AGENTBOX_TEST_WORKSPACE_CLOCK");
  return [clock = std::string(file ? file : "")] {
    int64_t t = 0;
    if (!clock.empty() && (std::ifstream(clock) >> t) && t > 0) return t;
    return static_cast<int64_t>(::time(nullptr));
  };
}

// What the workspaces' sweep reads (accounts/workspace_sweep.hpp): the profiles in force, the
// boxes not stopped, and the clock (days_clock).
accounts::WorkspaceSweep::Sources workspace_sweep_sources(std::shared_ptr<ProfileTable> profiles, BoxManager& manager) {
  accounts::WorkspaceSweep::Sources s;
  s.keeping = [profiles] {
    std::map<std::string, accounts::WorkspaceKeeping> out;
    for (const auto& [name, p] : profiles->get()->profiles)
      if (p.keep_days || p.reset) out[name] = {p.keep_days, p.reset};
    return out;
  };
  s.busy_boxes = [&manager] {
    auto answer = std::make_shared<std::promise<std::map<std::string, std::string>>>();
    std::future<std::map<std::string, std::string>> states = answer->get_future();
    manager.box_states([answer](std::map<std::string, std::string> m) { answer->set_value(std::move(m)); });
    if (states.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
      throw Error("the box loop did not say which boxes run");
    std::set<std::string> busy;
    for (const auto& [key, state] : states.get()) busy.insert(key);
    return busy;
  };
  s.now = days_clock();
  return s;
}

// `agentbox mcp` as an ordinary user makes no cgroup (run refuses its limit flags): none is
// looked for, as a tree it could not write would stop it.
std::unique_ptr<CgroupDriver> detect_cgroups(const ServeOptions& options) {
  if (options.local && !options.local->spec.use_cgroup) return nullptr;
  std::string why;
  std::unique_ptr<CgroupDriver> cgroups = CgroupDriver::detect("/sys/fs/cgroup", &why);
  if (!cgroups) throw Error("cgroups: " + why + " (see `agentbox doctor`)");
  if (!options.local) {
    // A predecessor killed with SIGKILL left its boxes' groups, and what ran in them: gone
    // before this daemon's first box (box/cgroup_orphans.hpp).
    const OrphanSweep sweep = reap_orphan_groups(agentbox_group_parents("/sys/fs/cgroup"));
    if (sweep.groups > 0)
      std::cout << "cgroups: removed " << sweep.groups << " groups left by a daemon that is gone ("
                << sweep.tasks_killed << " tasks killed)\n";
    for (const std::string& failed : sweep.failed)
      std::cerr << "cgroups: a group left behind stays: " << failed << "\n";
  }
  return cgroups;
}

// The egress policy in force: [policy.*] with each profile's rules, which its boxes add to their
// user's (net::EgressConfig::policy_for).
std::shared_ptr<const net::EgressConfig> egress_config_of(const ServerConfig& config) {
  net::EgressConfig egress = config.egress;
  for (const auto& [name, profile] : config.profiles.profiles) egress.profiles[name] = profile.egress;
  return std::make_shared<const net::EgressConfig>(std::move(egress));
}

std::shared_ptr<net::EgressContext> egress_context_of(const ServerConfig& config, std::shared_ptr<NetworkLog> log,
                                                      std::shared_ptr<net::NameResolver> resolver) {
  net::EgressLimits limits;
  limits.connections_per_account = config.egress_proxy.connections;
  limits.connect_rate = config.egress_proxy.connect_rate;
  limits.socket_buffer = config.egress_proxy.socket_buffer;
  limits.connect_timeout = config.egress_proxy.connect_timeout;
  limits.idle_timeout = config.egress_proxy.idle_timeout;
  limits.tunnel_idle_timeout = config.egress_proxy.tunnel_idle_timeout;
  return std::make_shared<net::EgressContext>(egress_config_of(config), limits, std::move(log), std::move(resolver));
}

// The inference gateway, when the operator gave a model credential: a listener beside the
// proxy's in each namespace; the tokens it counts are kept per account and day.
std::optional<net::InferenceGateway> gateway_of(const ServerConfig& config, boost::asio::io_context& io,
                                                std::optional<net::Credential>& credential,
                                                std::shared_ptr<net::NameResolver> resolver,
                                                std::shared_ptr<TokenLedger> ledger, std::shared_ptr<NetworkLog> log) {
  if (!credential) return std::nullopt;
  net::GatewayOptions g;
  g.upstream = config.inference.anthropic.upstream;
  g.credential = std::move(*credential);
  credential.reset();  // held by the gateway alone from here
  g.ca_file = config.inference.anthropic.ca_file;
  g.daily_tokens = config.inference.anthropic.daily_tokens;
  g.context_tokens = config.inference.anthropic.context_tokens;
  g.request_memory = config.inference.request_memory;
  g.connect_timeout = config.inference.connect_timeout;
  g.idle_timeout = config.inference.idle_timeout;
  g.connections_per_account = config.inference.connections;
  std::cout << "model gateway: " << g.upstream.to_string() << " with " << g.credential.describe() << "\n";
  return std::optional<net::InferenceGateway>(
      std::in_place, io,
      std::make_shared<net::GatewayContext>(std::move(g), std::move(resolver), std::move(ledger), std::move(log)));
}

// The mirror of homes, with [backup] dir: its thread starts here (the stop signals are blocked).
// Every stored key, in the map requests are checked against; a row that is not a digest (a
// hand-edited database) is skipped and said, never a daemon that does not start.
std::shared_ptr<http::UserKeys> load_user_keys(ApiKeyStore& store) {
  auto keys = std::make_shared<http::UserKeys>();
  for (const ApiKeyRecord& k : store.list()) {
    if (auto digest = http::UserKeys::digest_from_hex(k.digest_hex))
      keys->add(k.id, k.user, *digest);
    else
      log::warn("keys", "API key {}: its stored digest is not 64 hex digits; the key is refused", k.id);
  }
  return keys;
}

std::unique_ptr<backup::MirrorService> mirror_of(const ServerConfig& config, AccountStore& accounts,
                                                 accounts::RestoreGate& restore_gate,
                                                 std::shared_ptr<AccountVolumes> volumes) {
  if (config.backup.dir.empty()) return nullptr;
  backup::MirrorServiceOptions m;
  m.dir = config.backup.dir;
  m.interval = config.backup.interval;
  m.keep_deleted_days = static_cast<int>(config.backup.keep_deleted_days);
  m.status_file = config.state_dir + "/backup_status.json";
  m.homes = [&accounts, &restore_gate, state_dir = config.state_dir, volumes] {
    std::vector<backup::MirrorHome> homes;
    for (const Account& a : accounts.list()) {
      if (restore_gate.restoring(a.external_id)) continue;  // its home is not complete: the mirror's copy is the truth
      backup::MirrorHome home{a.name, state_dir + "/" + a.home_dir, a.external_id, a.uid, a.created, {}, {}};
      // A volume detached since it was used is attached for its copy; one copied since, not again.
      home.pin = [volumes, a]() -> std::shared_ptr<const void> {
        if (!volumes->mirror_wanted(a.name)) return nullptr;
        return std::make_shared<const VolumeLease>(volumes->lease({a.name, a.uid, a.gid}, true));
      };
      home.copied = [volumes, name = a.name] { volumes->mirror_taken(name); };
      home.host_workspaces = volumes->paths(a.name).root + "/workspaces";  // in the same volume: under the same pin
      homes.push_back(std::move(home));
    }
    return homes;
  };
  // Only what this node deleted is put away: after a lost disk the mirror waits for a restore.
  m.deleted_here = [&accounts](const std::string& name) { return accounts.was_deleted(name); };
  auto mirror = std::make_unique<backup::MirrorService>(std::move(m));
  mirror->start();
  std::cout << "backup: mirror of homes in " << config.backup.dir << " every " << config.backup.interval.count()
            << " s, deleted files kept " << config.backup.keep_deleted_days << " days\n";
  return mirror;
}

exec::ProcessTableOptions table_options(const ServerConfig& config, std::shared_ptr<AccountVolumes> volumes) {
  exec::ProcessTableOptions o;
  // In the account's volume (made by resolving the caller before any command starts).
  // Every box of an account (its profiles' too) logs in the account's volume.
  o.log_dir_of = [volumes](const std::string& box) {
    return volumes->paths(std::string(account_of_box(box))).daemon + "/logs";
  };
  o.output_cap = config.exec.output_cap;
  o.retention = config.exec.retention;
  o.keep_finished = config.exec.keep_finished;
  return o;
}

// network_of: what the agent's system prompt says of a user's network (Services::network_of).
api::AgentRoutesOptions agent_options(
    const ServerConfig& config, bool claude, bool gateway,
    std::function<std::string(const std::string& user, const std::string& profile)> network_of) {
  api::AgentRoutesOptions o;
  o.claude_model = config.agent.model;
  o.max_turns = config.agent.max_turns;
  o.max_retries = config.agent.max_retries;
  o.allowed_tools = config.agent.allowed_tools;
  o.public_url = config.agent.public_url;
  o.link_ttl = std::chrono::hours(24) * config.agent.link_days;
  o.task_model = config.agent.task_model;
  o.queued_turns_per_chat = static_cast<std::size_t>(config.agent.queued_turns_per_chat);
  o.warm = config.agent.warm_per_account > 0 && config.agent.warm_idle > 0;  // claude-code-ask needs it
  if (!claude)
    o.unavailable = "Claude Code is not installed on this server (see `agentbox doctor`)";
  else if (!gateway)
    o.unavailable =
        "no model credential is configured on this server ([inference.anthropic], AGENTBOX_ANTHROPIC_API_KEY)";
  o.network_of = std::move(network_of);
  return o;
}

}  // namespace

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGHUP);  // not a stop: reloads the egress policy
  ::pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int StopSignals::wait() {
  int sig = 0;
  ::sigwait(&set_, &sig);
  return sig;
}

Daemon::Daemon(ServerConfig config, ServeOptions options)
    : options_(std::move(options)),
      config_(std::move(config)),
      startup_(options_.local ? settle_local(config_) : settle(config_, options_)),
      agent_images_(startup_.agent, config_.state_dir),
      cgroups_(detect_cgroups(options_)),
      accounts_(open_state_db(config_.state_dir), UidRange{config_.accounts.uid_base, config_.accounts.uid_count}),
      volumes_(make_volumes(config_, accounts_)),
      process_store_(open_state_db(config_.state_dir)),
      chat_sessions_(open_state_db(config_.state_dir)),
      move_store_(startup_.placement ? std::optional<MoveStore>(std::in_place, open_state_db(config_.state_dir))
                                     : std::nullopt),
      api_keys_(open_state_db(config_.state_dir)),
      user_keys_(load_user_keys(api_keys_)),
      network_log_(std::make_shared<NetworkLog>(open_state_db(config_.state_dir),
                                                std::chrono::hours(24) * config_.egress_proxy.log_days,
                                                NetworkLog::kDefaultQueueLimit, config_.egress_proxy.log_rows)),
      token_ledger_(startup_.model_credential ? std::make_shared<TokenLedger>(open_state_db(config_.state_dir))
                                              : nullptr),
      resolver_(std::make_shared<net::NameResolver>()),
      egress_context_(egress_context_of(config_, network_log_, resolver_)),
      egress_(loop_.context(), egress_context_),
      gateway_(gateway_of(config_, loop_.context(), startup_.model_credential, resolver_, token_ledger_, network_log_)),
      terminal_loop_("terminals"),
      manager_(loop_,
               [this] {
                 BoxManagerOptions o;
                 // An account's network namespace gets the egress proxy's listener (and the gateway's)
                 // when it is made, on a launcher thread, and loses them when it is given back.
                 o.on_netns_created = [this](const std::string& account, int netns_fd) {
                   serve_netns(account, netns_fd);
                 };
                 o.on_netns_released = [this](const std::string& account) {
                   egress_.stop(account);
                   if (gateway_) gateway_->stop(account);
                 };
                 o.on_own_netns = std::bind_front(&Daemon::serve_own_netns, this);  // user_ns boxes
                 o.cgroups = cgroups_.get();
                 o.idle_timeout = config_.accounts.idle_timeout;
                 o.netns_linger = config_.accounts.idle_timeout;
                 o.start_timeout = config_.accounts.start_timeout;
                 o.max_active = config_.accounts.max_active;
                 if (const char* held = ::getenv("AGENTBOX_TEST_HOLD_START"); held && *held) {
                   // Test hook (tests/e2e): boxes of accounts whose external id starts with this never
                   // answer their start, so a test can show one stuck account harms no other.
                   o.hold_start = [this, prefix = std::string(held)](const std::string& name) {
                     auto account = accounts_.find_by_name(name);
                     return account && account->external_id.starts_with(prefix);
                   };
                 }
                 return o;
               }()),
      restore_gate_(config_.state_dir + "/restoring"),
      move_gate_(move_store_
                     ? std::optional<accounts::MoveGate>(std::in_place, *move_store_, startup_.placement->node())
                     : std::nullopt),
      creation_rate_(config_.accounts.new_per_minute),
      callers_(accounts_, config_.state_dir, {.open_homes = config_.accounts.open_homes}, volumes_,
               {.restoring = &restore_gate_,
                .moves = move_gate_ ? &*move_gate_ : nullptr,
                .placement = startup_.placement.get(),
                .accounts = &accounts_,
                .creations = &creation_rate_}),
      trash_upkeep_(callers_, accounts_, config_.storage.trash_days, trash_upkeep_interval()),
      boxes_(manager_, config_.state_dir, config_.box,
             {.egress_proxy = egress_on() ? config_.egress_proxy.port : uint16_t{0},
              .inference = gateway_ ? config_.inference.port : uint16_t{0}},
             agent_images_.mounts()),
      processes_(loop_, boxes_, process_store_, table_options(config_, volumes_)),
      terminals_(
          terminal_loop_, boxes_,
          {.max_per_account = config_.terminals.max_per_account, .idle_timeout = config_.terminals.idle_timeout}),
      claude_(loop_.context(), processes_, {},
              {.idle = std::chrono::seconds(config_.agent.warm_idle),
               .per_account = static_cast<std::size_t>(config_.agent.warm_per_account),
               .approval_timeout = std::chrono::seconds(config_.agent.approval_timeout)}),
      notebooks_(loop_.context(), processes_,
                 {.per_account = config_.notebooks.per_account,
                  .idle_timeout = config_.notebooks.idle_timeout,
                  .cell_timeout = config_.notebooks.cell_timeout}),
      file_pool_(std::make_shared<FairPool>(kFileThreads, static_cast<unsigned>(config_.accounts.file_ops), "files")),
      mirror_(mirror_of(config_, accounts_, restore_gate_, volumes_)),
      profiles_(std::make_shared<ProfileTable>(config_.profiles)),
      services_(services_of()),
      http_(routes(), http_options(), http_io_) {
  if (accounts::PlacementGuard* placement = startup_.placement.get()) {
    const ClusterNode& self = placement->placement()->self();
    std::cout << "cluster: node " << self.name << " (" << self.server << ") of " << *options_.cluster << ", "
              << placement->placement()->config().nodes.size() << " nodes, "
              << placement->placement()->config().pins.size() << " pins\n";
  }
  // Callers whose resolution is slow (SQL, a new volume, a mount: accounts/caller_routes.hpp)
  // wait in the file pool, fair per account, so the API's io thread never waits for them.
  callers_.set_pool(file_pool_);
  accounts_.limit_accounts(config_.accounts.max_accounts);  // new users past it: 503 (admission)
  if (volumes_->backend().kind() == VolumeKind::loop_image) start_idle_volumes();
  if (startup_.placement) {
    if (::mkdir((config_.state_dir + "/moves").c_str(), 0700) != 0 && errno != EEXIST)
      throw sys_error("mkdir(" + config_.state_dir + "/moves)");
  }
  // From the config by the account's own id: a spec is made for every command, so no SQL here.
  boxes_.set_file_size_limit([storage = config_.storage](const Account& account) {
    return storage.quota_for(account.external_id).disk_bytes;
  });
  if (options_.local) boxes_.set_run_shape(options_.local->spec, options_.local->env);
  // A profile's box: its limits over [box]'s, its read-only binds after the box's own.
  boxes_.set_profile_shape([profiles = profiles_](BoxSpec& spec, std::string_view name) {
    std::shared_ptr<const ProfileConfig> table = profiles->get();
    const Profile* profile = table->find(name);
    if (!profile) return;
    const uint64_t file_size = spec.limits.file_size;  // the user's quota, whatever the profile
    spec.limits = profile->limits(spec.limits);
    spec.limits.file_size = file_size;
    spec.binds.insert(spec.binds.end(), profile->binds.begin(), profile->binds.end());
    if (profile->idle_timeout) spec.idle_timeout = *profile->idle_timeout;
  });
  // isolation = "context": a box and a workspace per X-Terminal-Context-Id (but "default").
  callers_.set_context_isolation([profiles = profiles_](std::string_view name) {
    std::shared_ptr<const ProfileConfig> table = profiles->get();
    const Profile* profile = table->find(name);
    return profile && profile->isolation == Profile::Isolation::context;
  });
  // [profiles.NAME] keep_days and reset: a pass of the trash upkeep's thread.
  auto sweep =
      std::make_shared<accounts::WorkspaceSweep>(callers_, accounts_, workspace_sweep_sources(profiles_, manager_));
  trash_upkeep_.add_pass([sweep] { sweep->run_once(); });
  // [accounts] forget_after_days (with quotas: an image to delete): another pass of that
  // thread, every five minutes at most (a test's upkeep interval when it sets one).
  if (config_.accounts.forget_after_days > 0 && volumes_->backend().kind() == VolumeKind::loop_image) {
    auto forget = std::make_shared<accounts::AccountForgetting>(
        *volumes_, accounts_,
        accounts::AccountForgetting::Sources{.days = config_.accounts.forget_after_days,
                                             .now = days_clock(),
                                             .busy = [this] { return accounts_with_boxes(std::chrono::seconds(5)); },
                                             .every = ::getenv("AGENTBOX_TEST_TRASH_UPKEEP_SECONDS")
                                                          ? trash_upkeep_interval()
                                                          : std::chrono::seconds(300)});
    trash_upkeep_.add_pass([forget] { forget->run_due(); });
  }
  // The request counters' slots, one per route of the table now served (metrics/http_requests.hpp).
  std::vector<metrics::RouteName> names;
  for (const http::Route& r : http_.router().routes())
    names.push_back({std::string(http::to_string(r.method)), r.pattern});
  http_metrics_->name_routes(std::move(names));
}

// `agentbox mcp` without --allow-net (or an allow rule in its profile): no proxy in the box, as
// `agentbox run` has none.
bool Daemon::egress_on() const { return !options_.local || options_.local->network; }

Daemon::~Daemon() { stop(); }

// On a launcher thread, as the account's network namespace is made: the egress proxy's listener
// there, and the gateway's. A service that cannot listen leaves that box without it, said once.
void Daemon::serve_netns(const std::string& account, int netns_fd) {
  // `account` is the box's key: a profile's box serves its account's user.
  std::optional<Account> known = accounts_.find_by_name(account_of_box(account));
  std::string user = known ? known->external_id : std::string();
  try {
    if (egress_on()) egress_.serve(net::listen_in_netns(netns_fd, config_.egress_proxy.port), account, user);
  } catch (const std::exception& e) {
    log::warn("daemon", "egress proxy for {}: {} (its box has no network)", account, e.what());
  }
  if (!gateway_) return;
  try {
    gateway_->serve(net::listen_in_netns(netns_fd, config_.inference.port), account, user);
  } catch (const std::exception& e) {
    log::warn("daemon", "model gateway for {}: {} (its box cannot reach the model)", account, e.what());
  }
}

// On a launcher thread, for each user_ns box (`agentbox mcp` as an ordinary user): the egress
// listener in the namespace its init made, through a forked helper that joins the box's user
// namespace (as `agentbox run` makes it), replacing the previous box's. No gateway: the local
// mode has no model credential.
void Daemon::serve_own_netns(const std::string& account, pid_t init_pid) {
  if (!egress_on()) return;
  std::optional<Account> known = accounts_.find_by_name(account);
  try {
    egress_.serve(net::listen_in_netns_of(init_pid, config_.egress_proxy.port), account,
                  known ? known->external_id : std::string());
  } catch (const std::exception& e) {
    log::warn("daemon", "egress proxy for {}: {} (its box has no network)", account, e.what());
  }
}

api::Services Daemon::services_of() {
  api::Services s;
  s.accounts = &accounts_;
  s.callers = &callers_;
  s.api_keys = &api_keys_;
  s.user_keys = user_keys_;
  s.manager = &manager_;
  s.boxes = &boxes_;
  s.processes = &processes_;
  s.terminals = &terminals_;
  s.claude = &claude_;
  s.notebooks = &notebooks_;
  s.chats = &chat_sessions_;
  s.file_pool = file_pool_;
  s.network_log = network_log_;
  s.tokens = token_ledger_;
  s.gateway = gateway_ ? &*gateway_ : nullptr;
  s.network_of = [egress = egress_context_](const std::string& user, const std::string& profile) {
    return net::describe_for_box(egress->config()->policy_for(user, profile));
  };
  // Claude Code's download links open without the API key.
  s.links = std::make_shared<const http::SignedLinks>(load_or_create_state_secret(config_.state_dir, "link_key"));
  s.mirror = mirror_.get();
  s.restore_gate = &restore_gate_;
  s.placement = startup_.placement.get();
  s.moves = move_store_ ? &*move_store_ : nullptr;
  s.move_gate = move_gate_ ? &*move_gate_ : nullptr;
  s.version = kVersion;
  s.admin_key = startup_.admin_key;
  s.state_dir = config_.state_dir;
  s.trash_days = config_.storage.trash_days;
  s.daily_tokens = config_.inference.anthropic.daily_tokens;
  s.file_options.upload_max_bytes = config_.limits.body_bytes;
  s.file_options.preview_timeout = config_.notebooks.preview_timeout;
  s.terminal_options.api_key = startup_.api_key;
  s.terminal_options.user_keys = user_keys_;
  // With require_jwt the shared key alone names no one: not in an auth frame either.
  s.terminal_options.shared_key_in_frame = !config_.auth.require_jwt;
  s.proxy_options = api::proxy_options(config_.proxy);
  if (startup_.placement) s.proxy_options.node_name = startup_.placement->node();
  s.agent_options = agent_options(config_, !agent_images_.mounts().claude.empty(), gateway_.has_value(), s.network_of);
  s.skills_dir = agent_images_.mounts().skills_dir;
  s.profiles = profiles_;
  s.box_limits = config_.box;
  s.idle_timeout = config_.accounts.idle_timeout;
  s.metrics_page = [this] { return metrics_page(); };
  s.readiness = [this] { return readiness_.failing(); };
  s.forget_after_days = config_.accounts.forget_after_days;
  s.days_now = days_clock();
  return s;
}

std::string Daemon::metrics_page() {
  MetricsSources m;
  m.version = kVersion;
  m.http = http_metrics_.get();
  m.http_counters = [this] { return &http_.counters(); };
  m.boxes = &manager_;
  m.terminals = &terminals_;
  m.accounts = &accounts_;
  m.file_pool = file_pool_.get();
  m.mirror = mirror_.get();
  m.state_dir = config_.state_dir;
  return daemon::metrics_page(m);
}

// [metrics] listen: GET /metrics without a key, and the health checks; nothing else.
http::Router Daemon::metrics_routes() {
  http::Router router;
  http::RouteOptions open;
  open.is_public = true;
  router.add(
      http::verb::get, "/metrics", [this](const http::Request&) { return api::metrics_response(metrics_page()); },
      open);
  api::add_health_routes(router, services_);
  return router;
}

http::Router Daemon::routes() const {
  http::Router router;
  api::register_routes(router, services_);
  mcp::add_mcp_routes(router, services_);  // POST, DELETE /mcp
  return router;
}

http::HttpServerOptions Daemon::http_options() {
  http::HttpServerOptions h;
  // One io thread: the API's sockets all wait in its epoll, and nothing on it
  // blocks (file work goes to the pool). A second thread on the same io_context made every
  // event wake the other thread (~16 futex calls a request): lower latency and higher
  // throughput with one on 2 cores, and half of what nginx adds in front (bench/RESULTS.md).
  h.threads = 1;
  h.api_key = startup_.api_key;
  h.admin_key = startup_.admin_key;
  h.body_limit = config_.limits.body_bytes;
  h.header_timeout = config_.limits.header_timeout;
  h.max_connections = config_.limits.connections;
  h.max_connections_per_address = config_.limits.per_address();
  h.cors_origins = config_.cors_origins;
  h.spool_dir = config_.state_dir;
  // An upload is received into its account's volume, charged to its quota.
  h.spool_dir_for = [this](const http::Request& req) {
    accounts::Caller caller = callers_.resolve(req);
    return callers_.volume_of(caller.account).daemon;
  };
  h.links = services_.links;
  h.user_keys = user_keys_;
  h.openwebui_jwt_secret = config_.auth.openwebui_jwt_secret;
  h.require_jwt = config_.auth.require_jwt;
  if (startup_.placement) h.node_name = startup_.placement->node();
  h.on_request = [m = http_metrics_](const http::CompletedRequest& r) {
    m->observe(
        r.route_index == http::CompletedRequest::kNoRoute ? metrics::HttpRequestMetrics::kUnmatched : r.route_index,
        r.method, r.status, std::chrono::duration<double>(r.duration).count());
    audit_request(r, m->pattern(r.route_index));
  };
  return h;
}

void Daemon::run() {
  start_audit();
  const ListenAddress& addr = startup_.address;
  http::ListenerInfo listener = http_.listen(addr.host, addr.port);
  http_.start();
  if (!config_.metrics.listen.empty()) {
    http::HttpServerOptions mo;
    mo.threads = 1;
    mo.thread_name = "metrics";
    mo.max_connections = 64;  // a few scrapers and probes
    mo.max_connections_per_address = 64;
    metrics_http_ = std::make_unique<http::HttpServer>(metrics_routes(), std::move(mo));
    const ListenAddress m = parse_listen_address(config_.metrics.listen);
    http::ListenerInfo ml = metrics_http_->listen(m.host, m.port);
    metrics_http_->start();
    std::cout << "metrics on http://" << (m.host.find(':') != std::string::npos ? "[" + m.host + "]" : m.host) << ":"
              << ml.port << "/metrics" << std::endl;
  }
  std::string host = addr.host.find(':') != std::string::npos ? "[" + addr.host + "]" : addr.host;
  std::cout << "agentbox " << kVersion << " serving on http://" << host << ":" << listener.port << " (state "
            << config_.state_dir << ", cgroup " << (cgroups_ ? cgroups_->kind() : "none") << ")" << std::endl;
  int sig = 0;
  while ((sig = signals_.wait()) == SIGHUP) reload();
  log::info("daemon", "signal {}: stopping (finishing requests in flight)", sig);
}

// SIGHUP: the policy and the profiles are read again from the same file and environment; a
// file with an error changes nothing. Other keys take effect at the next start.
void Daemon::reload() {
  try {
    ServerConfig fresh = load_config(options_);
    egress_.set_config(egress_config_of(fresh));
    log::info("daemon", "SIGHUP: egress policy reloaded");
    const size_t profiles = fresh.profiles.profiles.size();
    profiles_->set(std::move(fresh.profiles));
    log::info("daemon", "SIGHUP: profiles reloaded ({})", profiles);
    if (startup_.placement) {
      startup_.placement->reload();
      log::info("daemon", "SIGHUP: cluster file reloaded ({} pins)",
                startup_.placement->placement()->config().pins.size());
    }
  } catch (const std::exception& e) {
    log::error("daemon", "SIGHUP: the configuration has errors, the policy stays as it was:\n{}", e.what());
  }
}

// Volumes nothing uses are detached: an account with a box (starting, running or stopping: its
// processes and terminals) keeps its volume; requests, uploads, moves and restores hold a
// lease. The box manager is asked on the detaching thread, a bounded wait.
void Daemon::start_idle_volumes() {
  auto pinned = [this] { return accounts_with_boxes(std::chrono::seconds(5)); };
  idle_volumes_.emplace(
      *volumes_, IdleVolumePolicy{.idle = config_.accounts.volume_idle, .max_attached = config_.accounts.attached},
      std::move(pinned), [this](const std::string& name) { callers_.close_home(name); });
}

// The accounts with a box starting, running or stopping (any of their profiles' or contexts'),
// as the box loop answers; nullopt when it does not within `wait`.
std::optional<std::set<std::string>> Daemon::accounts_with_boxes(std::chrono::seconds wait) {
  auto answer = std::make_shared<std::promise<std::map<std::string, std::string>>>();
  std::future<std::map<std::string, std::string>> states = answer->get_future();
  manager_.box_states([answer](std::map<std::string, std::string> s) { answer->set_value(std::move(s)); });
  if (states.wait_for(wait) != std::future_status::ready) return std::nullopt;
  std::set<std::string> accounts;
  for (const auto& [box, state] : states.get()) accounts.insert(std::string(account_of_box(box)));
  return accounts;
}

// The shutdown: what serves stops before what it uses, each step after the ones that could still
// reach it. Then the members go in reverse order, each already stopped: the writers store what
// they hold once their last holder has gone, the volumes unmount, the uid range is let go.
void Daemon::stop() {
  if (stopped_) return;
  stopped_ = true;
  // The metrics listener first: its page reads everything below.
  if (metrics_http_) metrics_http_->stop();

  http_.stop();                              // no new request; those in flight finish within the grace period,
                                             // the rest are closed; no route runs after this
  file_pool_->stop();                        // blocking work under way finishes (a deletion, a move, a
                                             // turn's last step); what waited for a client now gone is dropped
  if (mirror_) mirror_->stop();              // a pass under way ends at its next file
  trash_upkeep_.stop();                      // no purge while the boxes and volumes go
  if (idle_volumes_) idle_volumes_->stop();  // no detach while the boxes go
  terminals_.shut_down();                    // no terminal handler runs after this
  terminal_loop_.stop();                     // the terminals' WebSockets go with their loop, before the
                                             // boxes their shells run in
  notebooks_.shut_down();                    // no idle sweep; kernels are left to their boxes
  processes_.shut_down();                    // running commands are left to their boxes (read back "lost")
  manager_.shut_down();                      // every box stopped (bounded), the launchers joined, the zygote
                                             // gone: nothing on a launcher (a /proxy socket made in a box)
                                             // posts to the API's io context after this, and http_io_ and the
                                             // terminals' loop outlive it (declared before manager_)
  egress_.stop_all();                        // no new tunnel
  if (gateway_) gateway_->stop_all();        // no new model request
  loop_.stop();                              // open tunnels and model requests end with the box loop
  network_log_->flush();                     // the decisions and tokens so far are stored
  if (token_ledger_) token_ledger_->flush();
  audit::stop();  // the events queued so far are written, last
}

// [audit]: the trail's writer, told the operator's secrets (never written, whatever field
// they would reach) and how to name a user's account off the request path.
void Daemon::start_audit() {
  std::vector<std::string> scrub = {startup_.api_key, startup_.admin_key};
  if (startup_.model_credential) scrub.push_back(startup_.model_credential->secret);
  audit::start(trail_options(config_, kVersion, std::move(scrub), [this](const std::string& user) {
    std::optional<Account> account = accounts_.find(user);
    return account ? account->name : std::string();
  }));
  if (audit::on()) log::info("audit", "audit trail in {}", trail_options(config_, kVersion, {}, {}).file.path);
}

}  // namespace agentbox::daemon
