#include "config/egress_config.hpp"

#include <fmt/format.h>

#include "config/toml_schema.hpp"
#include "util/error.hpp"

namespace agentbox {
namespace {

constexpr std::string_view kDefaultPrefix = "policy.default.";
constexpr std::string_view kUsersPrefix = "policy.users.";
constexpr std::string_view kHostsPrefix = "hosts.";

std::vector<net::HostRule> host_rules(const toml::node& value) {
  std::vector<net::HostRule> rules;
  for (const std::string& text : toml_strings(value)) rules.push_back(net::HostRule::parse(text));
  return rules;
}

std::vector<net::AddressRange> address_ranges(const toml::node& value) {
  std::vector<net::AddressRange> ranges;
  for (const std::string& text : toml_strings(value)) ranges.push_back(net::AddressRange::parse(text));
  return ranges;
}

// A user's table, read whole: the walker hands it over as one value.
net::EgressPolicy user_policy(const toml::node& value) {
  const toml::table* table = value.as_table();
  if (!table) throw Error("expected a table of allow, deny and allow_addresses");
  net::EgressPolicy policy;
  for (const auto& [k, v] : *table) {
    try {
      if (!apply_policy_key(policy, k.str(), v))
        throw Error("unknown key \"" + std::string(k.str()) + "\" (expected allow, deny or allow_addresses)");
    } catch (const Error& e) {
      throw e.wrap(k.str());
    }
  }
  return policy;
}

}  // namespace

bool apply_policy_key(net::EgressPolicy& policy, std::string_view name, const toml::node& value) {
  if (name == "allow")
    policy.allow = host_rules(value);
  else if (name == "deny")
    policy.deny = host_rules(value);
  else if (name == "allow_addresses")
    policy.allow_addresses = address_ranges(value);
  else
    return false;
  return true;
}

void add_static_host(net::EgressConfig& config, std::string_view name, std::string_view address_text) {
  std::optional<std::string> host = net::normalize_host(name);
  if (!host || net::IpAddress::parse(name)) throw Error(fmt::format("\"{}\" is not a host name", name));
  std::optional<net::IpAddress> address = net::IpAddress::parse(address_text);
  if (!address) throw Error(fmt::format("\"{}\" is not an IP address", address_text));
  config.hosts[*host] = *address;
}

bool apply_egress_key(net::EgressConfig& config, std::string_view key, const toml::node& value) {
  if (key.starts_with(kDefaultPrefix))
    return apply_policy_key(config.default_policy, key.substr(kDefaultPrefix.size()), value);
  if (key.starts_with(kUsersPrefix)) {
    config.users[std::string(key.substr(kUsersPrefix.size()))] = user_policy(value);
    return true;
  }
  if (key.starts_with(kHostsPrefix)) {
    add_static_host(config, key.substr(kHostsPrefix.size()), toml_string(value));
    return true;
  }
  return false;
}

}  // namespace agentbox
