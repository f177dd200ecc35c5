#pragma once
// The [profiles.NAME] tables of the server config (issue 35): named kinds of box that Open WebUI
// reaches under /p/NAME/..., each a set of changes to the default box. Flat keys:
//
//   [profiles.build]
//   memory = "8G"   cpu = "4"   pids = 4096   tmp = "2G"  # as [box]; unset: [box]'s
//   idle_timeout = 1800                  # seconds, as [accounts]; unset: [accounts]'s
//   allow = ["*.crates.io"]              # added to [policy.default] (host or host:port)
//   deny = ["*.internal"]                # added too: default's and profile's deny beat any allow
//   allow_addresses = ["10.1.0.0/16"]    # added to [policy.default]'s
//   binds = ["/opt/toolchains", "/srv/ref:/ref"]   # host paths bound read-only (SRC[:DST])
//   isolation = "context"                # "user" (default): one box per user;
//                                        # "context": one per user and X-Terminal-Context-Id
//   users = ["alice", "bob"]             # X-User-Ids that may use it; absent: everyone
//   keep_days = 14                       # a context's workspace unused this long goes to the trash
//   reset = "@daily"                     # "@hourly", "@daily", "@weekly": workspaces start clean
//
// A request without the /p/ prefix is served by the unnamed default: [box], [accounts] and
// [policy.*] as they are, one box per user. Reloaded on SIGHUP with the egress policy.
#include <toml++/toml.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "box/box_spec.hpp"
#include "net/egress_policy.hpp"

namespace agentbox {

struct Profile {
  enum class Isolation { user, context };

  std::optional<uint64_t> memory_bytes;    // memory
  std::optional<uint32_t> cpu_millicores;  // cpu
  std::optional<uint64_t> pids;            // pids
  std::optional<uint64_t> tmp_bytes;       // tmp
  std::optional<std::chrono::seconds> idle_timeout;
  net::EgressPolicy egress;      // allow, deny, allow_addresses: added to the default's
  std::vector<BindMount> binds;  // read-only, sources absolute and existing when read
  Isolation isolation = Isolation::user;
  std::optional<std::vector<std::string>> users;  // X-User-Ids admitted; nullopt: everyone
  std::optional<uint32_t> keep_days;              // unset: workspaces are kept
  std::optional<std::chrono::seconds> reset;      // the period of `reset`; unset: never

  // The default box's limits with this profile's in place of those it sets.
  Limits limits(const Limits& base) const;
  std::chrono::seconds idle_timeout_or(std::chrono::seconds base) const { return idle_timeout.value_or(base); }
  // May the user with this X-User-Id use the profile?
  bool admits(std::string_view user) const;
};

struct ProfileConfig {
  std::map<std::string, Profile, std::less<>> profiles;  // by name

  const Profile* find(std::string_view name) const;
  // The names `user` may use, sorted: what a 404 for an unknown profile lists.
  std::vector<std::string> names_for(std::string_view user) const;
};

// A profile's name is what follows /p/ in a URL: 1 to 64 of [A-Za-z0-9_-].
bool valid_profile_name(std::string_view name);

// The tables the server config's walker descends into; "profiles.*" is each profile's table.
inline constexpr std::array<std::string_view, 2> kProfileSections = {"profiles", "profiles.*"};

// Stores one key the walker found in a profile's table ("profiles.build.memory"); false for a
// key that is not one of ours. Throws Error saying what is wrong with the value.
bool apply_profile_key(ProfileConfig& config, std::string_view key, const toml::node& value);

// Every [profiles.NAME] table of doc made a profile, keys or none; the errors its names and
// cross-key checks give, each `FILE: profiles.NAME: reason (line N)`.
std::vector<std::string> declare_profiles(ProfileConfig& config, const toml::table& doc, std::string_view file);

}  // namespace agentbox
