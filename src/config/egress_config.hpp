#pragma once
// The egress keys of the server config (DESIGN §4):
//
//   [policy.default]
//   allow = ["registry.npmjs.org", "*.pypi.org", "github.com:443"]  # host or host:port, * wildcards
//   deny = ["*.internal"]                                          # deny wins over allow
//   allow_addresses = []        # CIDRs of private/loopback/link-local/reserved places that may
//                               # be reached; the host's own addresses only by their own entry
//   [policy.users."alice"]      # a user's additions, by X-User-Id
//   allow = ["huggingface.co"]
//   [hosts]                     # static name -> address, consulted before DNS
//   "bait.test" = "127.0.0.1"
//
// No allow rule: no egress. Every rule is checked when the file is read, so a typo is an error
// naming its line, never a rule that silently matches nothing.
#include <toml++/toml.h>

#include <array>
#include <string_view>

#include "net/egress_policy.hpp"

namespace agentbox {

// The tables the server config's walker descends into for these keys.
inline constexpr std::array<std::string_view, 4> kEgressSections = {"policy", "policy.default", "policy.users",
                                                                    "hosts"};

// Stores one key the walker found under those sections ("policy.default.allow",
// "policy.users.alice" with its table, "hosts.bait.test"); false for a key that is not
// one of ours. Throws Error saying what is wrong with the value.
bool apply_egress_key(net::EgressConfig& config, std::string_view key, const toml::node& value);

// One static name -> address entry ([hosts], `agentbox run --add-host`). Throws Error when the
// name is not a host name (an IP literal is not one) or the address is not an IP address.
void add_static_host(net::EgressConfig& config, std::string_view name, std::string_view address_text);

// One key of a policy table (allow, deny, allow_addresses) stored in policy; false if the name
// is not a policy key. Shared with the profiles' flat keys (config/profile_config.hpp).
bool apply_policy_key(net::EgressPolicy& policy, std::string_view name, const toml::node& value);

}  // namespace agentbox
