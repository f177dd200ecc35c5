#include "daemon/startup.hpp"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "box/agent_paths.hpp"
#include "config/inference_config.hpp"
#include "util/capabilities.hpp"
#include "util/error.hpp"

namespace agentbox::daemon {

namespace {

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

UidRangeLock lock_uid_range(const ServerConfig& config) {
  if (::geteuid() != 0)
    throw UsageError(
        "serve must run as root: it gives every user their own uid (for one person without a server, use `agentbox "
        "run`)");
  const IdSpan uid_range{config.accounts.uid_base, config.accounts.uid_count};
  if (std::optional<std::string> conflict = host_uid_range_conflict(uid_range)) throw UsageError(*conflict);
  return UidRangeLock::acquire(uid_range, config.state_dir);
}

std::string api_key_of(const ServerConfig& config) {
  if (config.api_key) {
    std::cout << "API key: from AGENTBOX_API_KEY or the config file\n";
    return *config.api_key;
  }
  std::string key = load_or_create_api_key(config.state_dir);
  std::cout << "API key: in " << config.state_dir << "/api_key (mode 0600)\n";
  return key;
}

// The operator's key for /admin/ routes: a secret of its own, never the API key.
std::string admin_key_of(const ServerConfig& config) {
  if (config.admin_key) {
    std::cout << "admin key: from AGENTBOX_ADMIN_KEY or the config file\n";
    return *config.admin_key;
  }
  std::string key = load_or_create_state_secret(config.state_dir, "admin_key");
  std::cout << "admin key: in " << config.state_dir << "/admin_key (mode 0600)\n";
  return key;
}

}  // namespace

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

Startup settle(const ServerConfig& config, const ServeOptions& options) {
  UidRangeLock uid_range = lock_uid_range(config);
  ListenAddress address = parse_listen_address(config.listen);
  std::unique_ptr<accounts::PlacementGuard> placement = placement_of(options);
  // Keys given in the config or the environment: refused before anything else is said or made.
  if (config.api_key) require_strong_key("API key", *config.api_key, config.listen);
  if (config.admin_key) require_strong_key("admin key", *config.admin_key, config.listen);
  exec::AgentMounts agent = find_agent(config.agent);
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
  std::string api_key = api_key_of(config);
  std::string admin_key = admin_key_of(config);
  if (admin_key == api_key)
    throw UsageError("the admin key is the same as the API key: give admin_key a secret of its own");
  for (const auto& [what, key] : {std::pair{"API key", &api_key}, std::pair{"admin key", &admin_key}}) {
    require_strong_key(what, *key, config.listen);  // a key file an operator wrote
    if (auto warning = short_key_warning(what, *key)) std::cout << "warning: " << *warning << "\n";
  }
  for (const std::string& warning : config_warnings(config)) std::cout << "warning: " << warning << "\n";
  return Startup{std::move(address),   std::move(uid_range), std::move(placement),       std::move(api_key),
                 std::move(admin_key), std::move(agent),     std::move(model_credential)};
}

Startup settle_local(const ServerConfig& config) {
  raise_fd_limit();
  drop_capability(CAP_SYS_RESOURCE);
  if (::mkdir(config.state_dir.c_str(), 0700) == -1 && errno != EEXIST)
    throw sys_error("mkdir(" + config.state_dir + ")");
  Startup s;
  s.address = parse_listen_address(config.listen);
  s.api_key = load_or_create_api_key(config.state_dir);  // nothing listens: no one uses them
  s.admin_key = load_or_create_state_secret(config.state_dir, "admin_key");
  return s;
}

}  // namespace agentbox::daemon
