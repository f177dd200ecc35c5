#include "config/profile_config.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "config/bind_spec.hpp"
#include "config/egress_config.hpp"
#include "config/toml_schema.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

constexpr std::string_view kPrefix = "profiles.";
constexpr size_t kMaxNameChars = 64;

// Places a bind would hide what every box relies on: its own /tmp, /proc, /dev, its /etc, the
// homes and Claude Code's directory.
constexpr std::array<std::string_view, 8> kReservedTargets = {"/proc", "/dev",  "/sys",      "/tmp",
                                                              "/etc",  "/home", "/agentbox", "/root"};

bool under(std::string_view path, std::string_view dir) {
  return path == dir || (path.starts_with(dir) && path.size() > dir.size() && path[dir.size()] == '/');
}

// A read-only bind from "SRC[:DST]". A profile's binds are the operator's host paths: ~ has no
// meaning here, and the box's own places are not to be covered.
BindMount profile_bind(const std::string& spec) {
  if (spec.starts_with("~")) throw Error("\"" + spec + "\": a bind's source must be an absolute host path");
  BindMount bind = bind_from_spec(spec, /*writable=*/false, /*caller_home=*/"");
  for (std::string_view reserved : kReservedTargets)
    if (under(bind.target, reserved) || under(reserved, bind.target))
      throw Error(fmt::format("\"{}\": {} would cover the box's own {}", spec, bind.target, reserved));
  return bind;
}

Profile::Isolation isolation(const toml::node& value) {
  const std::string text = toml_string(value);
  if (text == "user") return Profile::Isolation::user;
  if (text == "context") return Profile::Isolation::context;
  throw Error("expected \"user\" or \"context\", not \"" + text + "\"");
}

std::chrono::seconds reset_period(const toml::node& value) {
  const std::string text = toml_string(value);
  if (text == "@hourly") return std::chrono::hours(1);
  if (text == "@daily") return std::chrono::hours(24);
  if (text == "@weekly") return std::chrono::hours(24 * 7);
  throw Error("expected \"@hourly\", \"@daily\" or \"@weekly\", not \"" + text + "\"");
}

std::vector<std::string> user_ids(const toml::node& value) {
  std::vector<std::string> users = toml_strings(value);
  if (users.empty()) throw Error("an empty list admits nobody; leave users out to admit everyone");
  for (const std::string& u : users)
    if (u.empty()) throw Error("a user id is empty");
  return users;
}

// One flat key of a profile; false for a name that is not one.
bool apply_field(Profile& p, std::string_view field, const toml::node& v) {
  if (field == "memory")
    p.memory_bytes = toml_size(v);
  else if (field == "cpu")
    p.cpu_millicores = toml_cpu(v);
  else if (field == "pids")
    p.pids = static_cast<uint64_t>(toml_integer(v, 1, INT32_MAX));
  else if (field == "tmp")
    p.tmp_bytes = toml_size(v);
  else if (field == "idle_timeout")
    p.idle_timeout = toml_seconds(v);
  else if (field == "binds") {
    p.binds.clear();
    for (const std::string& spec : toml_strings(v)) p.binds.push_back(profile_bind(spec));
  } else if (field == "isolation")
    p.isolation = isolation(v);
  else if (field == "users")
    p.users = user_ids(v);
  else if (field == "keep_days")
    p.keep_days = static_cast<uint32_t>(toml_integer(v, 1, 3650));
  else if (field == "reset")
    p.reset = reset_period(v);
  else
    return apply_policy_key(p.egress, field, v);
  return true;
}

}  // namespace

Limits Profile::limits(const Limits& base) const {
  Limits out = base;
  if (memory_bytes) out.memory_bytes = *memory_bytes;
  if (cpu_millicores) out.cpu_millicores = *cpu_millicores;
  if (pids) out.pids = *pids;
  if (tmp_bytes) out.tmp_bytes = *tmp_bytes;
  return out;
}

bool Profile::admits(std::string_view user) const {
  return !users || std::find(users->begin(), users->end(), user) != users->end();
}

const Profile* ProfileConfig::find(std::string_view name) const {
  auto it = profiles.find(name);
  return it == profiles.end() ? nullptr : &it->second;
}

std::vector<std::string> ProfileConfig::names_for(std::string_view user) const {
  std::vector<std::string> names;
  for (const auto& [name, profile] : profiles)
    if (profile.admits(user)) names.push_back(name);
  return names;  // the map's order: sorted
}

bool valid_profile_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameChars) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

bool apply_profile_key(ProfileConfig& config, std::string_view key, const toml::node& value) {
  if (!key.starts_with(kPrefix)) return false;
  const std::string_view rest = key.substr(kPrefix.size());
  const size_t dot = rest.rfind('.');
  // The walker descends into each [profiles.NAME]; what reaches here otherwise is a value where
  // that table belongs, a table inside one, or a name with a dot in it.
  if (dot == std::string_view::npos || value.is_table())
    throw Error("expected flat keys in a table [profiles.NAME], NAME 1-64 letters, digits, '-' or '_'");
  return apply_field(config.profiles[std::string(rest.substr(0, dot))], rest.substr(dot + 1), value);
}

std::vector<std::string> declare_profiles(ProfileConfig& config, const toml::table& doc, std::string_view file) {
  std::vector<std::string> errors;
  const toml::table* tables = doc["profiles"].as_table();
  if (!tables) return errors;  // absent; a non-table is the walker's error
  for (const auto& [k, value] : *tables) {
    const std::string name(k.str());
    if (!value.is_table() || name.find('.') != std::string::npos) continue;  // the walker says so
    const uint32_t line = k.source().begin.line;  // not the binding itself: clang captures none
    auto error = [&](std::string_view why) {
      errors.push_back(fmt::format("{}: profiles.{}: {} (line {})", file, name, why, line));
    };
    if (!valid_profile_name(name)) {
      error("a profile's name is 1-64 letters, digits, '-' or '_' (it is a URL's /p/NAME)");
      continue;
    }
    const Profile& p = config.profiles[name];
    if (p.isolation != Profile::Isolation::context && (p.keep_days || p.reset))
      error("keep_days and reset are about the workspaces of isolation = \"context\"");
  }
  return errors;
}

}  // namespace agentbox
