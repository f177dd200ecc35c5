#include "config/server_config.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>

#include <fmt/format.h>

#include "config/agent_config.hpp"
#include "config/audit_config.hpp"
#include "config/egress_config.hpp"
#include "config/inference_config.hpp"
#include "config/metrics_config.hpp"
#include "config/notebook_config.hpp"
#include "config/secret_file.hpp"
#include "config/toml_schema.hpp"
#include "config/units.hpp"
#include "net/ip_address.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/random_hex.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

// The largest usable uid: (uid_t)-1 means "no change" to setresuid and friends.
constexpr uint64_t kMaxUid = 0xFFFFFFFEull;
constexpr size_t kApiKeyBytes = 32;
// More would let one account's file operations crowd out everyone else's (and its descriptors).
constexpr int64_t kMaxFileOps = 64;
// Each spare volume holds a loop device and a mount while it waits for a new account.
constexpr int64_t kMaxSpareVolumes = 64;
// Each terminal holds a shell, a pty and its replay buffer for as long as it lives.
constexpr int64_t kMaxTerminalsPerAccount = 1024;
// Each API connection is a descriptor of the daemon's (a terminal's WebSocket also holds a pty).
constexpr int64_t kMaxConnections = 1'000'000;

void require_api_key_text(std::string_view key, std::string_view what = "api key") {
  if (key.empty()) throw Error(std::string(what) + " is empty");
  for (char c : key)
    if (c <= ' ' || c > '~') throw Error(std::string(what) + " must be printable ASCII without spaces");
}

void set_listen(ServerConfig& c, std::string_view text) {
  parse_listen_address(text);
  c.listen = std::string(text);
}

void set_state_dir(ServerConfig& c, std::string_view text) {
  if (text.empty()) throw Error("state_dir is empty");
  c.state_dir = std::string(text);
}

void set_api_key(ServerConfig& c, std::string_view text) {
  require_api_key_text(text);
  c.api_key = std::string(text);
}

// AGENTBOX_UID_BASE: a whole number, the first uid; the range must still end at a usable uid.
void set_uid_base(ServerConfig& c, std::string_view text) {
  uint64_t base = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), base);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || base < 1 || base > kMaxUid)
    throw Error("uid_base must be a whole number from 1 to " + std::to_string(kMaxUid));
  if (base + c.accounts.uid_count - 1 > kMaxUid)
    throw Error("uid_base + uid_count - 1 exceeds the largest uid " + std::to_string(kMaxUid));
  c.accounts.uid_base = static_cast<uid_t>(base);
}

void set_admin_key(ServerConfig& c, std::string_view text) {
  require_api_key_text(text, "admin key");
  c.admin_key = std::string(text);
}

constexpr std::array<TomlField<ServerConfig>, 49> kFields = {{
    {"listen", [](ServerConfig& c, const toml::node& v) { set_listen(c, toml_string(v)); }},
    {"state_dir", [](ServerConfig& c, const toml::node& v) { set_state_dir(c, toml_string(v)); }},
    {"api_key", [](ServerConfig& c, const toml::node& v) { set_api_key(c, toml_string(v)); }},
    {"admin_key", [](ServerConfig& c, const toml::node& v) { set_admin_key(c, toml_string(v)); }},
    {"backup.dir", [](ServerConfig& c, const toml::node& v) { c.backup.dir = toml_string(v); }},
    {"backup.interval",
     [](ServerConfig& c, const toml::node& v) {
       c.backup.interval = toml_seconds(v);
     }},
    {"backup.keep_deleted_days",
     [](ServerConfig& c, const toml::node& v) {
       c.backup.keep_deleted_days = static_cast<uint32_t>(toml_integer(v, 1, 3650));
     }},
    {"cors_origins", [](ServerConfig& c, const toml::node& v) { c.cors_origins = toml_strings(v); }},
    {"limits.body", [](ServerConfig& c, const toml::node& v) { c.limits.body_bytes = toml_size(v); }},
    {"limits.header_timeout",
     [](ServerConfig& c, const toml::node& v) { c.limits.header_timeout = toml_seconds(v); }},
    {"limits.connections",
     [](ServerConfig& c, const toml::node& v) {
       c.limits.connections = static_cast<size_t>(toml_integer(v, 1, kMaxConnections));
     }},
    {"limits.connections_per_address",
     [](ServerConfig& c, const toml::node& v) {
       c.limits.connections_per_address = static_cast<size_t>(toml_integer(v, 1, kMaxConnections));
     }},
    {"accounts.uid_base",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.uid_base = static_cast<uid_t>(toml_integer(v, 1, kMaxUid));
     }},
    {"accounts.uid_count",
     [](ServerConfig& c, const toml::node& v) {
       // Slot 0 belongs to `agentbox run`, so a server needs at least two.
       c.accounts.uid_count = static_cast<uint32_t>(toml_integer(v, 2, kMaxUid));
     }},
    {"accounts.idle_timeout",
     [](ServerConfig& c, const toml::node& v) { c.accounts.idle_timeout = toml_seconds(v); }},
    {"accounts.max_active",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.max_active = static_cast<size_t>(toml_integer(v, 1, INT32_MAX));
     }},
    {"accounts.start_timeout",
     [](ServerConfig& c, const toml::node& v) { c.accounts.start_timeout = toml_seconds(v); }},
    {"accounts.file_ops",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.file_ops = static_cast<size_t>(toml_integer(v, 1, kMaxFileOps));
     }},
    {"accounts.open_homes",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.open_homes = static_cast<size_t>(toml_integer(v, 1, INT32_MAX));
     }},
    {"accounts.spare_volumes",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.spare_volumes = static_cast<size_t>(toml_integer(v, 0, kMaxSpareVolumes));
     }},
    {"accounts.new_per_minute",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.new_per_minute = static_cast<uint32_t>(toml_integer(v, 0, INT32_MAX));
     }},
    {"accounts.max_accounts",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.max_accounts = static_cast<size_t>(toml_integer(v, 0, kMaxUid));
     }},
    {"accounts.volume_idle",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.volume_idle = std::chrono::seconds(toml_integer(v, 1, 86400));
     }},
    {"accounts.attached",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.attached = static_cast<size_t>(toml_integer(v, 0, INT32_MAX));
     }},
    {"accounts.forget_after_days",
     [](ServerConfig& c, const toml::node& v) {
       c.accounts.forget_after_days = static_cast<uint32_t>(toml_integer(v, 0, 36500));
     }},
    {"box.memory", [](ServerConfig& c, const toml::node& v) { c.box.memory_bytes = toml_size(v); }},
    {"box.pids",
     [](ServerConfig& c, const toml::node& v) {
       c.box.pids = static_cast<uint64_t>(toml_integer(v, 1, INT32_MAX));
     }},
    {"box.cpu", [](ServerConfig& c, const toml::node& v) { c.box.cpu_millicores = toml_cpu(v); }},
    {"box.tmp", [](ServerConfig& c, const toml::node& v) { c.box.tmp_bytes = toml_size(v); }},
    {"box.ptys",
     [](ServerConfig& c, const toml::node& v) { c.box.ptys = checked_ptys(toml_integer(v, 1, INT32_MAX)); }},
    {"box.tcp_memory",
     [](ServerConfig& c, const toml::node& v) { c.box.tcp_memory_bytes = checked_tcp_memory(toml_size(v)); }},
    {"exec.output_cap", [](ServerConfig& c, const toml::node& v) { c.exec.output_cap = toml_size(v); }},
    {"exec.retention", [](ServerConfig& c, const toml::node& v) { c.exec.retention = toml_seconds(v); }},
    {"exec.keep_finished",
     [](ServerConfig& c, const toml::node& v) { c.exec.keep_finished = static_cast<size_t>(toml_integer(v, 0, 1'000'000)); }},
    {"terminals.max_per_account",
     [](ServerConfig& c, const toml::node& v) {
       c.terminals.max_per_account = static_cast<size_t>(toml_integer(v, 1, kMaxTerminalsPerAccount));
     }},
    {"terminals.idle_timeout",
     [](ServerConfig& c, const toml::node& v) { c.terminals.idle_timeout = toml_seconds(v); }},
    {"egress.port",
     [](ServerConfig& c, const toml::node& v) { c.egress_proxy.port = static_cast<uint16_t>(toml_integer(v, 1, 65535)); }},
    {"egress.connections",
     [](ServerConfig& c, const toml::node& v) {
       c.egress_proxy.connections = static_cast<size_t>(toml_integer(v, 1, 65536));
     }},
    {"egress.connect_timeout",
     [](ServerConfig& c, const toml::node& v) { c.egress_proxy.connect_timeout = toml_seconds(v); }},
    {"egress.idle_timeout",
     [](ServerConfig& c, const toml::node& v) { c.egress_proxy.idle_timeout = toml_seconds(v); }},
    {"egress.tunnel_idle_timeout",
     [](ServerConfig& c, const toml::node& v) { c.egress_proxy.tunnel_idle_timeout = toml_seconds(v); }},
    {"egress.log_days",
     [](ServerConfig& c, const toml::node& v) { c.egress_proxy.log_days = static_cast<uint32_t>(toml_integer(v, 1, 3650)); }},
    {"egress.log_rows",
     [](ServerConfig& c, const toml::node& v) {
       c.egress_proxy.log_rows = static_cast<uint32_t>(toml_integer(v, 100, 10'000'000));
     }},
    {"egress.connect_rate",
     [](ServerConfig& c, const toml::node& v) {
       c.egress_proxy.connect_rate = static_cast<uint32_t>(toml_integer(v, 0, 100'000));
     }},
    {"egress.socket_buffer",
     [](ServerConfig& c, const toml::node& v) {
       uint64_t bytes = toml_size(v);
       if (bytes != 0 && (bytes < (8u << 10) || bytes > (64u << 20)))
         throw Error("expected 0 (the kernel's autotuning) or a size from 8K to 64M");
       c.egress_proxy.socket_buffer = bytes;
     }},
    {"proxy.connect_timeout",
     [](ServerConfig& c, const toml::node& v) { c.proxy.connect_timeout = toml_seconds(v); }},
    {"proxy.response_timeout",
     [](ServerConfig& c, const toml::node& v) { c.proxy.response_timeout = toml_seconds(v); }},
    {"proxy.idle_timeout", [](ServerConfig& c, const toml::node& v) { c.proxy.idle_timeout = toml_seconds(v); }},
    {"proxy.tunnel_idle_timeout",
     [](ServerConfig& c, const toml::node& v) { c.proxy.tunnel_idle_timeout = toml_seconds(v); }},
}};
// A size above the entries would leave an entry with no key and no function.
static_assert(std::ranges::none_of(kFields, [](const auto& f) { return f.key.empty() || f.apply == nullptr; }));

// The tables descended into; the egress policy's (config/egress_config.hpp), the inference
// gateway's (config/inference_config.hpp) and the agent's (config/agent_config.hpp) are appended.
constexpr std::array<std::string_view, 8> kOwnSections = {"limits",    "accounts", "box",    "exec",
                                                          "terminals", "proxy",    "egress", "backup"};
constexpr auto kSections = [] {
  std::array<std::string_view, kOwnSections.size() + kEgressSections.size() + kInferenceSections.size() +
                                   kAgentSections.size() + kStorageSections.size() + kAuthSections.size() +
                                   kNotebookSections.size() + kProfileSections.size() + kMetricsSections.size() +
                                   kAuditSections.size()>
      all{};
  size_t i = 0;
  for (std::string_view s : kOwnSections) all[i++] = s;
  for (std::string_view s : kEgressSections) all[i++] = s;
  for (std::string_view s : kInferenceSections) all[i++] = s;
  for (std::string_view s : kAgentSections) all[i++] = s;
  for (std::string_view s : kStorageSections) all[i++] = s;
  for (std::string_view s : kAuthSections) all[i++] = s;
  for (std::string_view s : kNotebookSections) all[i++] = s;
  for (std::string_view s : kProfileSections) all[i++] = s;
  for (std::string_view s : kMetricsSections) all[i++] = s;
  for (std::string_view s : kAuditSections) all[i++] = s;
  return all;
}();

// Environment overlay: variable -> setter.
struct EnvSetting {
  const char* name;
  void (*apply)(ServerConfig&, std::string_view);
};
constexpr std::array<EnvSetting, 6> kEnvSettings = {{
    {"AGENTBOX_LISTEN", set_listen},
    {"AGENTBOX_UID_BASE", set_uid_base},
    {"AGENTBOX_STATE_DIR", set_state_dir},
    {"AGENTBOX_API_KEY", set_api_key},
    {"AGENTBOX_ADMIN_KEY", set_admin_key},
    {"AGENTBOX_CORS_ORIGINS",
     [](ServerConfig& c, std::string_view text) {
       c.cors_origins.clear();
       while (!text.empty()) {
         size_t comma = text.find(',');
         std::string_view origin = text.substr(0, comma);
         while (!origin.empty() && origin.front() == ' ') origin.remove_prefix(1);
         while (!origin.empty() && origin.back() == ' ') origin.remove_suffix(1);
         if (!origin.empty()) c.cors_origins.emplace_back(origin);
         text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
       }
     }},
}};

// Checks that span several keys.
std::vector<std::string> cross_checks(const ServerConfig& c, const std::string& file) {
  std::vector<std::string> errors;
  for (const auto& [what, key] : {std::pair{"api key", &c.api_key}, std::pair{"admin key", &c.admin_key}}) {
    try {
      if (*key) require_key_strength(what, **key, c.listen);
    } catch (const Error& e) {
      errors.push_back(file + ": " + e.what());
    }
  }
  if (uint64_t{c.accounts.uid_base} + c.accounts.uid_count - 1 > kMaxUid)
    errors.push_back(file + ": accounts: uid_base + uid_count - 1 exceeds the largest uid " + std::to_string(kMaxUid));
  if (c.api_key && c.admin_key && *c.api_key == *c.admin_key)
    errors.push_back(file + ": admin_key is the same as api_key: the admin key must be a secret of its own");
  if (c.limits.per_address() > c.limits.connections)
    errors.push_back(file + ": limits.connections_per_address (" + std::to_string(c.limits.per_address()) +
                     ") is more than limits.connections (" + std::to_string(c.limits.connections) + ")");
  if (std::string auth = check_auth_config(c.auth); !auth.empty()) errors.push_back(file + ": " + auth);
  if (c.inference.port == c.egress_proxy.port)
    errors.push_back(file + ": inference.port and egress.port are both " + std::to_string(c.egress_proxy.port) +
                     ": each needs its own port in the box");
  return errors;
}

std::vector<std::string> overlay_file(ServerConfig& config, const std::string& path) {
  std::optional<toml::table> doc;
  try {
    doc = read_toml_file(path, /*missing_ok=*/false);
  } catch (const Error& e) {
    return {e.what()};
  }
  std::vector<std::string> errors =
      walk_toml(*doc, kSections, path, [&](std::string_view key, const toml::node& value) {
        for (const TomlField<ServerConfig>& f : kFields) {
          if (f.key == key) {
            f.apply(config, value);
            return true;
          }
        }
        return apply_egress_key(config.egress, key, value) || apply_inference_key(config.inference, key, value) ||
               apply_agent_key(config.agent, key, value) || apply_storage_key(config.storage, key, value) ||
               apply_auth_key(config.auth, key, value) || apply_notebook_key(config.notebooks, key, value) ||
               apply_profile_key(config.profiles, key, value) || apply_metrics_key(config.metrics, key, value) ||
               apply_audit_key(config.audit, key, value);
      });
  for (std::string& e : declare_profiles(config.profiles, *doc, path)) errors.push_back(std::move(e));
  for (std::string& e : cross_checks(config, path)) errors.push_back(std::move(e));
  // A relative state_dir in a file means next to the file, wherever the daemon starts from.
  const std::string file_dir = std::filesystem::absolute(path).parent_path().string();
  if (doc->contains("state_dir") && !config.state_dir.empty() && config.state_dir.front() != '/')
    config.state_dir = absolute_path(config.state_dir, file_dir);
  resolve_agent_paths(config.agent, file_dir);  // the same for the agent's paths
  if (!config.backup.dir.empty()) config.backup.dir = absolute_path(config.backup.dir, file_dir);
  if (!config.audit.path.empty()) config.audit.path = absolute_path(config.audit.path, file_dir);
  return errors;
}

std::string new_api_key() { return random_hex(kApiKeyBytes); }

// The existing key, or nullopt if there is no key file. Refuses files others could read or
// that someone else owns: the key is the server's only credential.
std::optional<std::string> read_api_key(const std::string& path) {
  std::optional<std::string> text = read_secret_file(path, /*missing_ok=*/true);
  if (!text) return std::nullopt;
  try {
    require_api_key_text(*text);
  } catch (const Error& e) {
    throw e.wrap(path);
  }
  return text;
}

}  // namespace

Limits default_server_box_limits() {
  Limits limits;
  limits.memory_bytes = 2ull << 30;
  limits.pids = 1024;
  limits.cpu_millicores = 2000;
  limits.tmp_bytes = 512ull << 20;
  limits.ptys = 256;
  limits.tcp_memory_bytes = 64ull << 20;
  return limits;
}

ListenAddress parse_listen_address(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Error("invalid listen address \"" + std::string(text) + "\": " + std::string(why));
  };
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) throw bad("expected HOST:PORT");
  std::string host(text.substr(0, colon));
  std::string_view port_text = text.substr(colon + 1);
  bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);

  unsigned char addr[16];
  int family = bracketed ? AF_INET6 : AF_INET;
  if (::inet_pton(family, host.c_str(), addr) != 1)
    throw bad(bracketed ? "not an IPv6 address" : "host must be an IPv4 address or [IPv6]");

  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535)
    throw bad("port must be a number from 0 to 65535");
  return {host, static_cast<uint16_t>(port)};
}

void require_key_strength(std::string_view what, std::string_view key, const std::string& listen) {
  if (key.size() >= kMinKeyChars) return;
  const ListenAddress addr = parse_listen_address(listen);
  const std::optional<net::IpAddress> ip = net::IpAddress::parse(addr.host);
  if (ip && net::classify(*ip) == net::AddressKind::loopback) return;
  throw Error(
      fmt::format("{} is {} characters long; listening on {} (beyond loopback) needs at least {} "
                  "(e.g. `openssl rand -hex 32`)",
                  what, key.size(), addr.host, kMinKeyChars));
}

std::optional<std::string> short_key_warning(std::string_view what, std::string_view key) {
  if (key.size() >= kMinKeyChars) return std::nullopt;
  return fmt::format("{} is {} characters long: accepted on loopback only; listening beyond it needs at least {}", what,
                     key.size(), kMinKeyChars);
}

void apply_config_file(ServerConfig& config, const std::string& path) { throw_if_errors(overlay_file(config, path)); }

void apply_config_env(ServerConfig& config, const GetEnv& getenv) {
  for (const EnvSetting& s : kEnvSettings) {
    const char* value = getenv(s.name);
    if (!value) continue;
    try {
      s.apply(config, value);
    } catch (const Error& e) {
      throw e.wrap(s.name);
    }
  }
}

std::string absolute_path(const std::string& path, const std::string& base) {
  namespace fs = std::filesystem;
  if (!path.empty() && path.front() == '/') return fs::path(path).lexically_normal().string();
  return (fs::path(base.empty() ? fs::current_path() : fs::path(base)) / path).lexically_normal().string();
}

ServerConfig load_server_config(const std::optional<std::string>& config_path, const GetEnv& getenv) {
  ServerConfig config;
  std::optional<std::string> path = config_path;
  if (!path) {
    if (const char* from_env = getenv("AGENTBOX_CONFIG"); from_env && *from_env) path = from_env;
  }
  if (path) apply_config_file(config, *path);
  apply_config_env(config, getenv);
  return config;
}

std::vector<std::string> validate_config_file(const std::string& path) {
  ServerConfig scratch;
  return overlay_file(scratch, path);
}

std::vector<std::string> config_warnings(const ServerConfig& c) {
  std::vector<std::string> warnings;
  const ListenAddress addr = parse_listen_address(c.listen);
  if (c.agent.public_url.empty() && (addr.host == "0.0.0.0" || addr.host == "::"))
    warnings.push_back("listen is " + c.listen +
                       " (every address) and [agent] public_url is unset: the agent's "
                       "download links name the address each request arrived at, which browsers may not reach; "
                       "set public_url to the address they use");
  return warnings;
}

std::string load_or_create_api_key(const std::string& state_dir) {
  return load_or_create_state_secret(state_dir, "api_key");
}

std::string load_or_create_state_secret(const std::string& state_dir, const std::string& name) {
  if (::mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + state_dir + ")");
  const std::string path = state_dir + "/" + name;
  if (std::optional<std::string> key = read_api_key(path)) return *key;

  // Write a complete file under a temporary name, then link() it into place: link never
  // replaces, so of two first starts one wins and the other reads the winner's key.
  std::string tmp = state_dir + "/." + name + ".XXXXXX";
  UniqueFd fd(::mkstemp(tmp.data()));
  if (!fd) throw sys_error("mkstemp(" + tmp + ")");
  try {
    check(::fchmod(fd.get(), 0600), "fchmod(" + tmp + ")");
    write_all(fd.get(), new_api_key() + "\n");
    check(::fsync(fd.get()), "fsync(" + tmp + ")");
    if (::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) throw sys_error("link(" + tmp + ", " + path + ")");
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  ::unlink(tmp.c_str());
  if (std::optional<std::string> key = read_api_key(path)) return *key;
  throw Error(path + ": vanished right after it was created");
}

}  // namespace agentbox
