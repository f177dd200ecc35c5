#pragma once
// What a box may reach through its egress proxy, and the verdict on one destination.
//
// A request is judged twice: by name (deny rules win over allow rules; no allow rule, no
// egress) and, once the proxy has resolved the name, by the address it will connect to
// (loopback, link-local, private, CGNAT, multicast, unspecified and reserved addresses are
// refused unless an allow_addresses range holds them; an address of the host itself, or the
// unspecified address, only when an entry names exactly that address: a private network
// allowed is not the host on it). The proxy connects to the address it checked, so a name that
// resolves differently a moment later (DNS rebinding) gains nothing.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/ip_address.hpp"

namespace agentbox::net {

// "registry.npmjs.org", "*.pypi.org", "github.com:443", "203.0.113.7", "[2001:db8::1]:443".
// '*' matches any run of characters, dots included: "*.pypi.org" holds files.pypi.org and
// a.b.pypi.org but not pypi.org itself.
struct HostRule {
  std::string pattern;           // lower case, no trailing dot; an IP literal in canonical form
  std::optional<uint16_t> port;  // none: every port

  static HostRule parse(std::string_view text);              // throws Error naming the text
  bool matches(std::string_view host, uint16_t port) const;  // host as normalize_host returns it
  std::string to_string() const;
};

// A host as a client wrote it, in the form rules compare: lower case, without a trailing dot
// or IPv6 brackets, an IP literal canonical. nullopt when it cannot be a host name or address.
std::optional<std::string> normalize_host(std::string_view host);

struct EgressPolicy {
  std::vector<HostRule> allow;
  std::vector<HostRule> deny;
  std::vector<AddressRange> allow_addresses;  // private/loopback/link-local places allowed

  // This policy with another's rules added (a user's additions to the default).
  EgressPolicy with(const EgressPolicy& additions) const;
  bool allows_anything() const { return !allow.empty(); }
};

// The whole configuration: the default, each user's additions, and the static name map
// consulted before DNS.
struct EgressConfig {
  EgressPolicy default_policy;
  std::map<std::string, EgressPolicy, std::less<>> users;  // by X-User-Id
  std::map<std::string, IpAddress, std::less<>> hosts;     // normalized name -> address
  // By profile name ([profiles.NAME] allow, deny, allow_addresses): added after the user's, so
  // a profile's deny beats a user's allow. The daemon copies them in from the profiles.
  std::map<std::string, EgressPolicy, std::less<>> profiles;

  EgressPolicy policy_for(std::string_view user) const;
  // The policy of user's box under profile ("" the default: policy_for(user)).
  EgressPolicy policy_for(std::string_view user, std::string_view profile) const;
};

struct Verdict {
  bool allowed = false;
  // Denied: one line the agent can act on ("agentbox: example.com:443 is not in this
  // sandbox's network allowlist"). Allowed: the rule that allowed it, for the log.
  std::string reason;
};

// The rules in one sentence for the box's system prompt (GET /system).
std::string describe_for_box(const EgressPolicy& policy);

// The name stage: host normalized, port the destination's.
Verdict check_name(const EgressPolicy& policy, std::string_view host, uint16_t port);
// The address stage, for the address the proxy is about to connect to. host_addresses: those
// of the namespace the proxy connects from (net/host_addresses.hpp), loopback ones aside (their
// kind keeps them out already).
Verdict check_address(const EgressPolicy& policy, std::string_view host, uint16_t port, const IpAddress& address,
                      const std::vector<IpAddress>& host_addresses = {});

}  // namespace agentbox::net
