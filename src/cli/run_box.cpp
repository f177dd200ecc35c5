#include "cli/run_box.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "config/bind_spec.hpp"
#include "config/server_config.hpp"
#include "config/units.hpp"
#include "util/error.hpp"

namespace agentbox::cli {
namespace {

struct Caller {
  uid_t uid;
  gid_t gid;
  std::string name;
  std::string home;
};

// A name that is safe as /home/NAME: a login name's characters, no leading dot.
bool usable_name(std::string_view n) {
  if (n.empty() || n.size() > 32 || n[0] == '.' || n[0] == '-') return false;
  return std::all_of(n.begin(), n.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
}

// Name and home from the local passwd file, read directly rather than through NSS: the CLI is
// linked statically, and NSS modules cannot be loaded into it. An account known only to a
// directory service is named by $USER; $HOME wins for the home, as in a shell.
Caller who_calls() {
  Caller c{::getuid(), ::getgid(), "user", "/"};
  bool found = false;
  if (std::FILE* f = std::fopen("/etc/passwd", "re")) {
    while (const passwd* pw = ::fgetpwent(f)) {
      if (pw->pw_uid != c.uid) continue;
      found = usable_name(pw->pw_name);
      if (found) c.name = pw->pw_name;
      c.home = pw->pw_dir;
      break;
    }
    std::fclose(f);
  }
  if (const char* u = ::getenv("USER"); !found && u && usable_name(u)) c.name = u;
  if (const char* h = ::getenv("HOME"); h && *h == '/') c.home = h;
  return c;
}

// Uses the same rules as the profile so flags and file agree.
template <class F>
auto flag(const char* name, F&& f) {
  try {
    return f();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(std::string(name) + ": " + e.what());
  }
}

void ensure_home(const std::string& path, const BoxSpec& spec) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return;
  if (std::filesystem::exists(path, ec)) throw UsageError("--home: " + path + ": not a directory");
  std::filesystem::create_directories(path, ec);
  if (ec) throw UsageError("--home: " + path + ": " + ec.message());
  ::chmod(path.c_str(), 0700);
  if (spec.identity == IdentityMode::host_uid && ::chown(path.c_str(), spec.uid, spec.gid) != 0)
    throw Error("chown(" + path + "): " + std::strerror(errno), errno);
}

BoxSpec make_spec(const RunOptions& o, const RunProfile& profile, const Caller& caller) {
  BoxSpec spec;
  spec.hostname = "agentbox";
  if (::geteuid() == 0) {
    // Root gets a real unprivileged uid: slot 0 of the server's range is reserved for run.
    spec.identity = IdentityMode::host_uid;
    spec.uid = spec.gid = ServerConfig::Accounts{}.uid_base;
    spec.name = "agent";
  } else {
    spec.identity = IdentityMode::user_ns;
    spec.uid = spec.outer_uid = caller.uid;
    spec.gid = spec.outer_gid = caller.gid;
    spec.name = caller.name;
  }
  spec.home_target = "/home/" + spec.name;
  spec.home_source = o.home         ? flag("--home", [&] { return expand_home(*o.home, caller.home); })
                     : profile.home ? *profile.home
                                    : caller.home + "/.agentbox-home";
  if (spec.home_source.empty() || spec.home_source[0] != '/')
    throw UsageError("--home: " + spec.home_source + ": must be an absolute path");

  spec.binds = profile.binds;
  for (const auto& b : o.ro_binds) spec.binds.push_back(parse_bind_spec(b, /*writable=*/false, caller.home));
  for (const auto& b : o.binds) spec.binds.push_back(parse_bind_spec(b, /*writable=*/true, caller.home));
  if (o.cwd) {
    std::error_code ec;
    const std::string here = std::filesystem::current_path(ec);
    if (ec) throw UsageError("--cwd: " + ec.message());
    spec.binds.push_back({here, here, true});
  }

  const bool limits_asked = o.memory || o.pids || o.cpu || o.tcp_memory || profile.memory_bytes || profile.pids ||
                            profile.cpu_millicores || profile.tcp_memory_bytes;
  if (profile.memory_bytes) spec.limits.memory_bytes = *profile.memory_bytes;
  if (profile.pids) spec.limits.pids = *profile.pids;
  if (profile.cpu_millicores) spec.limits.cpu_millicores = *profile.cpu_millicores;
  if (profile.tcp_memory_bytes) spec.limits.tcp_memory_bytes = *profile.tcp_memory_bytes;
  if (o.memory) spec.limits.memory_bytes = flag("--memory", [&] { return parse_size(*o.memory); });
  if (o.pids) spec.limits.pids = flag("--pids", [&] { return parse_count(*o.pids); });
  if (o.cpu) spec.limits.cpu_millicores = flag("--cpu", [&] { return parse_cpu(*o.cpu); });
  if (o.tcp_memory)
    spec.limits.tcp_memory_bytes = flag("--tcp-memory", [&] { return checked_tcp_memory(parse_size(*o.tcp_memory)); });
  // The box's own devpts, no cgroup needed: any caller may bound it.
  if (profile.ptys) spec.limits.ptys = *profile.ptys;
  if (o.ptys) spec.limits.ptys = flag("--ptys", [&] { return checked_ptys(parse_count(*o.ptys)); });

  // Cgroups need root (or a delegated v2 subtree, not supported yet): never pretend.
  spec.use_cgroup = ::geteuid() == 0;
  if (!spec.use_cgroup && limits_asked)
    throw UsageError("--memory/--pids/--cpu/--tcp-memory need cgroups, which only root can create here");

  if (o.net != "none") throw UsageError("--net: \"" + o.net + "\" is not supported yet (only \"none\")");
  return spec;
}

// The variables --env, --pass-env and the profile set (the profile's first, the flags over it).
std::map<std::string, std::string> run_env(const RunOptions& o, const RunProfile& profile) {
  std::map<std::string, std::string> env;
  auto pass = [&](const std::string& name) {
    if (const char* v = ::getenv(name.c_str())) env[name] = v;
  };
  for (const auto& name : profile.pass_env) pass(name);
  for (const auto& name : o.pass_env) pass(name);
  for (const auto& [k, v] : profile.env) env[k] = v;
  for (const auto& kv : o.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--env: expected KEY=VALUE, got \"" + kv + "\"");
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace

RunBox make_run_box(const RunOptions& o) {
  const Caller caller = who_calls();
  RunBox box;
  box.caller_home = caller.home;
  if (!o.no_profile) {
    const std::string path = o.profile ? *o.profile : default_run_profile_path(caller.home);
    if (o.profile && !std::filesystem::exists(path))
      throw UsageError("--profile: " + path + ": No such file or directory");
    try {
      box.profile = load_run_profile(path, caller.home);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
  try {
    box.spec = make_spec(o, box.profile, caller);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  // The network: none, or the egress proxy with the flags' and profile's rules.
  box.egress = run_egress_config(o.net_flags, box.profile.egress);
  if (box.egress) box.spec.egress_proxy_port = ServerConfig::EgressProxy{}.port;
  box.env = run_env(o, box.profile);
  return box;
}

void ensure_run_home(const BoxSpec& spec) { ensure_home(spec.home_source, spec); }

}  // namespace agentbox::cli
