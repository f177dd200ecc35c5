#pragma once
// Configuration of `agentbox serve`. Built-in defaults make a config file optional.
// Precedence: flags > AGENTBOX_* environment > file > defaults. load_server_config() does
// defaults, file and environment; the CLI overlays its flags on the result.
//
//   listen = "127.0.0.1:8000"
//   state_dir = "./agentbox-state"   # relative: to the file's directory (in a file) or to the
//                                    # working directory (default, flag, environment)
//   api_key = "..."                 # optional: else generated into STATE/api_key (0600)
//   admin_key = "..."               # optional: else generated into STATE/admin_key (0600);
//                                   # the only key /admin/ routes accept
//   cors_origins = ["*"]
//   [limits]   body = "100M"  header_timeout = 10
//              connections = 10000  connections_per_address = 8192   (API connections open at once;
//              when full, idle and unauthenticated ones are closed first to make room)
//   [accounts] uid_base = 1000000  uid_count = 65536  idle_timeout = 900
//              max_active = 1000  start_timeout = 30  file_ops = 2  open_homes = 256
//              spare_volumes = 2  forget_after_days = 0
//              new_per_minute = 600  max_accounts = 0   (new users past either: 429 / 503)
//              disk = "10G"  inodes = 1000000  trash_days = 7   (config/storage_config.hpp)
//   [accounts.users."ID"] disk = "50G"  inodes = 2000000
//   [box]      memory = "2G"  pids = 1024  cpu = "2"  tmp = "512M"
//              ptys = 256           # devpts max= of each box: the host's pty pool is shared
//              tcp_memory = "64M"   # socket buffers of its TCP (cgroup v1 kmem.tcp; v2: in memory)
//   [exec]     output_cap = "16M"  retention = 3600  keep_finished = 1000
//   [terminals] max_per_account = 16  idle_timeout = 3600
//   [proxy]    connect_timeout = 10  response_timeout = 60  idle_timeout = 300
//              tunnel_idle_timeout = 3600
//   [egress]   port = 3128  connections = 64  connect_timeout = 10  idle_timeout = 300
//              tunnel_idle_timeout = 3600  log_days = 30  log_rows = 10000  connect_rate = 20
//              socket_buffer = "512K"      (each an account's: open connections, network log rows
//              kept, new connections a second; a proxy socket's receive buffer, half that to send)
//   [policy.default] allow = [...]  deny = [...]  allow_addresses = [...]
//   [policy.users."NAME"] ...  [hosts] "name" = "address"   (config/egress_config.hpp)
//   [inference] port = 3129, request_memory ...  [inference.anthropic] upstream, key_file, ca_file, daily_tokens,
//                                                             context_tokens
//                                                             (config/inference_config.hpp)
//   [agent]    claude = "PATH"  skills_dir = "PATH"           (config/agent_config.hpp)
//   [auth]     openwebui_jwt_secret = "..."  require_jwt = false  (config/auth_config.hpp)
//   [notebooks] per_account = 4  idle_timeout = 3600  cell_timeout = 300  (config/notebook_config.hpp)
//   [files]    preview_timeout = 60
//   [backup]   dir = "PATH"  interval = 300  keep_deleted_days = 7   (mirror of homes; no dir: off)
//   [profiles.NAME] memory, cpu, pids, tmp, idle_timeout, allow, deny, allow_addresses, binds,
//              isolation, users, keep_days, reset   (/p/NAME/...: config/profile_config.hpp)
//
// Durations are whole seconds; sizes take units (config/units.hpp). Unknown keys are errors.
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "box/box_spec.hpp"
#include "config/agent_config.hpp"
#include "config/audit_config.hpp"
#include "config/auth_config.hpp"
#include "config/inference_config.hpp"
#include "config/metrics_config.hpp"
#include "config/notebook_config.hpp"
#include "config/profile_config.hpp"
#include "config/storage_config.hpp"
#include "net/egress_policy.hpp"

namespace agentbox {

// Box limits a server account gets unless its policy says otherwise.
Limits default_server_box_limits();

struct ServerConfig {
  std::string listen = "127.0.0.1:8000";  // HOST:PORT; port 0 picks a free one
  std::string state_dir = "./agentbox-state";
  std::optional<std::string> api_key;    // unset: load_or_create_api_key(state_dir)
  std::optional<std::string> admin_key;  // unset: load_or_create_state_secret(state_dir, "admin_key")
  std::vector<std::string> cors_origins = {"*"};

  struct HttpLimits {
    uint64_t body_bytes = 100ull << 20;       // largest request body, bytes
    std::chrono::seconds header_timeout{10};  // time to receive the request head
    // API connections open at once, terminal WebSockets and /proxy included. When full, the
    // oldest idle connection (unauthenticated first) is closed to make room; with none idle, 503.
    size_t connections = 10'000;
    // Of them from one client address (an IPv6 /64), the same way, with 429. Open WebUI's backend
    // (or nginx in front) brings every user from one address, thousands of long-polls among them:
    // generous, yet short of the above, so one address cannot take every place.
    // Unset: 8192, or `connections` when that is less; set, at most `connections`.
    std::optional<size_t> connections_per_address;
    size_t per_address() const { return connections_per_address.value_or(std::min<size_t>(8'192, connections)); }
  } limits;

  struct Accounts {
    uid_t uid_base = 1000000;                // first uid; slot 0 is `agentbox run`'s
    uint32_t uid_count = 65536;              // uids in the range, slot 0 included
    std::chrono::seconds idle_timeout{900};  // a box with no activity stops after this
    size_t max_active = 1000;                // boxes running at once; above it new ones get 503
    std::chrono::seconds start_timeout{30};  // a box start may take this long, then the account's requests fail
    size_t file_ops = 2;                     // file operations running at once per account, 1-64
    size_t open_homes = 256;                 // home directory descriptors kept open (least recently used)
    size_t spare_volumes = 2;                // volumes made ahead for new accounts (with quotas), 0-64
    uint32_t new_per_minute = 600;           // accounts made a minute at most (a burst of as many); 0: no limit
    size_t max_accounts = 0;                 // accounts held at most; 0: as many as the uid range has
    std::chrono::seconds volume_idle{300};   // a volume nothing uses this long is detached (1-86400)
    size_t attached = 0;                     // volumes attached at once, idle ones detached first; 0: no cap
    uint32_t forget_after_days = 0;          // an empty home not used this long loses its volume; 0: never
  } accounts;

  StorageConfig storage;  // [accounts] disk, inodes, trash_days, [accounts.users."ID"]

  Limits box = default_server_box_limits();

  struct Exec {
    uint64_t output_cap = 16ull << 20;     // output log kept per process, bytes
    std::chrono::seconds retention{3600};  // a finished process stays queryable this long
    size_t keep_finished = 1000;           // and at most this many per account (0: no cap)
  } exec;

  struct Terminals {
    size_t max_per_account = 16;              // open terminals per account; above it 429
    std::chrono::seconds idle_timeout{3600};  // a terminal with no client and no output ends after this
  } terminals;

  // /proxy/{port}: the reverse proxy into a box's own loopback.
  struct Proxy {
    std::chrono::seconds connect_timeout{10};        // connecting to the box's port; then 504
    std::chrono::seconds response_timeout{60};       // request sent → response head complete; then 504
    std::chrono::seconds idle_timeout{300};          // no byte moving either way while a body streams
    std::chrono::seconds tunnel_idle_timeout{3600};  // the same after a WebSocket upgrade
  } proxy;

  // The egress proxy in each box's network namespace (HTTP_PROXY in the box).
  struct EgressProxy {
    uint16_t port = 3128;                            // on the box's 127.0.0.1
    size_t connections = 64;                         // open at once per account; above it 429
    std::chrono::seconds connect_timeout{10};        // resolving and connecting; then 504
    std::chrono::seconds idle_timeout{300};          // a forwarded http:// request with no byte moving
    std::chrono::seconds tunnel_idle_timeout{3600};  // a CONNECT tunnel with no byte moving
    uint32_t log_days = 30;                          // decisions older than this are forgotten
    uint32_t log_rows = 10'000;                      // decisions kept per account, newest first (100-10M)
    uint32_t connect_rate =
        20;  // new origin connections per account a second, after a burst of `connections`; then 429. 0: no limit
    uint64_t socket_buffer =
        512 << 10;  // a proxy socket's receive buffer (half that to send) and a tunnel's pipe; 0: autotuning
  } egress_proxy;

  net::EgressConfig egress;  // what boxes may reach through the egress proxy: nothing by default

  InferenceConfig inference;  // the model gateway in each box's namespace (ANTHROPIC_BASE_URL)

  AgentConfig agent;         // Claude Code in every box (/agentbox/bin/claude), the operator's skills
  NotebookConfig notebooks;  // [notebooks] kernels in boxes, [files] preview_timeout (config/notebook_config.hpp)

  // The mirror of homes (backup/mirror_service.hpp).
  struct Backup {
    std::string dir;                     // the mirror's root; "" = no mirror. Relative: to the file's directory
    std::chrono::seconds interval{300};  // between passes
    uint32_t keep_deleted_days = 7;      // deleted and overwritten files are kept this many days
  } backup;

  AuthConfig auth;  // [auth]: Open WebUI's signed user (config/auth_config.hpp)

  ProfileConfig profiles;  // [profiles.NAME]: the boxes under /p/NAME (config/profile_config.hpp)
  // [metrics]: a listener for GET /metrics without a key (config/metrics_config.hpp)
  MetricsConfig metrics;
  // [audit]: the OCSF audit trail (config/audit_config.hpp)
  AuditConfig audit;
};

struct ListenAddress {
  std::string host;  // numeric IPv4 or IPv6 (without brackets)
  uint16_t port = 0;
};
// "127.0.0.1:8000" or "[::1]:8000"; throws Error naming the value.
ListenAddress parse_listen_address(std::string_view text);

// A key under this many characters is guessable or a placeholder ("changeme", "test").
constexpr size_t kMinKeyChars = 32;

// Throws Error when `key` (`what`: "api key", "admin key") is shorter than kMinKeyChars and the
// daemon listens beyond loopback (`listen`: the listen setting), where anyone on the network can
// try keys. On loopback only local users can, and a short key is accepted (a first try, a
// laptop): short_key_warning says so.
void require_key_strength(std::string_view what, std::string_view key, const std::string& listen);
std::optional<std::string> short_key_warning(std::string_view what, std::string_view key);

// Looks up an environment variable (nullptr if unset); ::getenv in production.
using GetEnv = std::function<const char*(const char*)>;

// defaults, then the file (config_path if given, else $AGENTBOX_CONFIG if set, else none),
// then AGENTBOX_LISTEN, AGENTBOX_UID_BASE, AGENTBOX_STATE_DIR, AGENTBOX_API_KEY,
// AGENTBOX_ADMIN_KEY, AGENTBOX_CORS_ORIGINS (comma-separated). Throws Error with every problem
// found, one per line.
ServerConfig load_server_config(const std::optional<std::string>& config_path, const GetEnv& getenv = ::getenv);

// The two overlays, for callers that compose their own order. Both throw on any error.
void apply_config_file(ServerConfig& config, const std::string& path);
void apply_config_env(ServerConfig& config, const GetEnv& getenv);

// Every problem in the file, one line each, naming file, key and line: for
// `agentbox config check FILE`. Empty when the file is good.
std::vector<std::string> validate_config_file(const std::string& path);

// What a valid configuration does that its operator may not expect, one line each (printed by
// `agentbox config check` and at start-up): a wildcard listen address without [agent] public_url.
std::vector<std::string> config_warnings(const ServerConfig& config);

// path made absolute (normalized): relative to base, or to the working directory when base is
// empty. The daemon's state directory is always absolute once it starts: boxes are built from
// paths that must not depend on anyone's working directory.
std::string absolute_path(const std::string& path, const std::string& base = {});

// The key in STATE/api_key, created (32 random bytes, hex, mode 0600) if absent; state_dir is
// created (0700) if missing. A key file others can read is refused. Safe against a concurrent
// first start: both get the same key.
std::string load_or_create_api_key(const std::string& state_dir);
// The same for another secret of the daemon's own, in STATE/name (the link signing key).
std::string load_or_create_state_secret(const std::string& state_dir, const std::string& name);

}  // namespace agentbox
