#include "config/run_profile.hpp"

#include <algorithm>
#include <array>

#include "config/bind_spec.hpp"
#include "config/egress_config.hpp"
#include "config/toml_schema.hpp"
#include "config/units.hpp"

namespace agentbox {
namespace {

// The profile as it is read: binds are kept apart so ro_bind comes first whatever the
// (alphabetical) walk order, and the caller's home is at hand for ~.
struct ProfileLoad {
  const std::string& caller_home;
  RunProfile profile;
  std::vector<BindMount> ro_binds, rw_binds;
};

bool is_env_name(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

void require_env_name(std::string_view name) {
  if (!is_env_name(name)) throw Error("\"" + std::string(name) + "\" is not a variable name (letters, digits, _)");
}

std::vector<BindMount> read_binds(const toml::node& value, bool writable, const std::string& home) {
  std::vector<BindMount> binds;
  for (const std::string& spec : toml_strings(value)) binds.push_back(bind_from_spec(spec, writable, home));
  return binds;
}

void read_env_table(ProfileLoad& p, const toml::node& value) {
  const toml::table* table = value.as_table();
  if (!table) throw Error("expected a table of NAME = \"value\"");
  for (const auto& [k, v] : *table) {
    std::string name(k.str());
    require_env_name(name);
    std::string text = toml_string(v);
    if (text.find('\0') != std::string::npos) throw Error(name + ": value contains a NUL byte");
    p.profile.env[name] = std::move(text);
  }
}

constexpr std::array<TomlField<ProfileLoad>, 10> kFields = {{
    {"ro_bind", [](ProfileLoad& p, const toml::node& v) { p.ro_binds = read_binds(v, false, p.caller_home); }},
    {"bind", [](ProfileLoad& p, const toml::node& v) { p.rw_binds = read_binds(v, true, p.caller_home); }},
    {"pass_env",
     [](ProfileLoad& p, const toml::node& v) {
       std::vector<std::string> names = toml_strings(v);
       for (const std::string& name : names) require_env_name(name);
       p.profile.pass_env = std::move(names);
     }},
    {"env", read_env_table},
    {"home",
     [](ProfileLoad& p, const toml::node& v) {
       std::string home = expand_home(toml_string(v), p.caller_home);
       if (home.empty() || home.front() != '/') throw Error("must be an absolute path or start with ~/");
       p.profile.home = std::move(home);
     }},
    {"limits.memory", [](ProfileLoad& p, const toml::node& v) { p.profile.memory_bytes = toml_size(v); }},
    {"limits.pids", [](ProfileLoad& p,
                       const toml::node& v) { p.profile.pids = static_cast<uint64_t>(toml_integer(v, 1, INT32_MAX)); }},
    {"limits.cpu", [](ProfileLoad& p, const toml::node& v) { p.profile.cpu_millicores = toml_cpu(v); }},
    {"limits.ptys",
     [](ProfileLoad& p, const toml::node& v) { p.profile.ptys = checked_ptys(toml_integer(v, 1, INT32_MAX)); }},
    {"limits.tcp_memory",
     [](ProfileLoad& p, const toml::node& v) { p.profile.tcp_memory_bytes = checked_tcp_memory(toml_size(v)); }},
}};
// A size above the entries would leave an entry with no key and no function.
static_assert(std::ranges::none_of(kFields, [](const auto& f) { return f.key.empty() || f.apply == nullptr; }));

// The egress policy reads as in the server config ([policy.default], [hosts]); there is one
// person, so no [policy.users].
constexpr std::array<std::string_view, 4> kSections = {"limits", "policy", "policy.default", "hosts"};

}  // namespace

std::string default_run_profile_path(const std::string& caller_home) {
  return caller_home + "/.config/agentbox/run.toml";
}

RunProfile load_run_profile(const std::string& path, const std::string& caller_home) {
  std::optional<toml::table> doc = read_toml_file(path, /*missing_ok=*/true);
  if (!doc) return {};
  ProfileLoad load{caller_home, {}, {}, {}};
  throw_if_errors(walk_toml(*doc, kSections, path, [&](std::string_view key, const toml::node& value) {
    for (const auto& f : kFields) {
      if (f.key == key) {
        f.apply(load, value);
        return true;
      }
    }
    if (!key.starts_with("policy.default.") && !key.starts_with("hosts.")) return false;
    return apply_egress_key(load.profile.egress, key, value);
  }));
  load.profile.binds = std::move(load.ro_binds);
  load.profile.binds.insert(load.profile.binds.end(), load.rw_binds.begin(), load.rw_binds.end());
  return std::move(load.profile);
}

}  // namespace agentbox
