#include "net/egress_policy.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <charconv>

#include "util/error.hpp"

namespace agentbox::net {
namespace {

constexpr size_t kMaxHostLength = 253;  // DNS's limit for a name in text form

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; });
  return out;
}

// '*' matches any run of characters (iterative, linear in practice: one star backtrack point).
bool glob_match(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p, ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string where(std::string_view host, uint16_t port) {
  bool v6 = host.find(':') != std::string_view::npos;
  return v6 ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

}  // namespace

std::optional<std::string> normalize_host(std::string_view host) {
  if (std::optional<IpAddress> ip = IpAddress::parse(host)) return ip->to_string();
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  if (host.empty() || host.size() > kMaxHostLength) return std::nullopt;
  std::string name = lower(host);
  if (!std::all_of(name.begin(), name.end(), is_name_char)) return std::nullopt;
  // One trailing dot is the root's (dropped above); a second would survive as "name." and slip
  // past every rule that names the host without it (a deny rule among them).
  if (name.front() == '.' || name.back() == '.' || name.find("..") != std::string::npos) return std::nullopt;
  return name;
}

HostRule HostRule::parse(std::string_view text) {
  auto bad = [&](std::string_view why) { return Error(fmt::format("\"{}\" is not a host rule: {}", text, why)); };
  HostRule rule;
  std::string_view host = text;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {  // [v6]:port
    size_t close = text.find(']');
    if (close == std::string_view::npos) throw bad("an IPv6 address opened with '[' must close with ']'");
    host = text.substr(0, close + 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throw bad("expected :PORT after ']'");
      port_text = text.substr(close + 2);
      if (port_text.empty()) throw bad("the port after ':' is missing");
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {  // host:port (a bare v6 has more)
    size_t colon = text.find(':');
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (port_text.empty()) throw bad("the port after ':' is missing");
  }
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535)
      throw bad("the port must be a number from 1 to 65535");
    rule.port = static_cast<uint16_t>(port);
  }
  if (std::optional<IpAddress> ip = IpAddress::parse(host)) {
    rule.pattern = ip->to_string();
    return rule;
  }
  if (!host.empty() && host.front() == '[') throw bad("not an IPv6 address between the brackets");
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  if (host.empty()) throw bad("the host is empty");
  if (host.size() > kMaxHostLength) throw bad("longer than a host name can be");
  rule.pattern = lower(host);
  for (char c : rule.pattern)
    if (!is_name_char(c) && c != '*')
      throw bad(std::string("'") + c + "' cannot appear in a host name (use * as the wildcard)");
  return rule;
}

bool HostRule::matches(std::string_view host, uint16_t p) const {
  if (port && *port != p) return false;
  return glob_match(pattern, host);
}

std::string HostRule::to_string() const {
  if (!port) return pattern;
  return where(pattern, *port);
}

EgressPolicy EgressPolicy::with(const EgressPolicy& additions) const {
  EgressPolicy out = *this;
  out.allow.insert(out.allow.end(), additions.allow.begin(), additions.allow.end());
  out.deny.insert(out.deny.end(), additions.deny.begin(), additions.deny.end());
  out.allow_addresses.insert(out.allow_addresses.end(), additions.allow_addresses.begin(),
                             additions.allow_addresses.end());
  return out;
}

EgressPolicy EgressConfig::policy_for(std::string_view user) const {
  auto it = users.find(user);
  return it == users.end() ? default_policy : default_policy.with(it->second);
}

EgressPolicy EgressConfig::policy_for(std::string_view user, std::string_view profile) const {
  auto it = profile.empty() ? profiles.end() : profiles.find(profile);
  return it == profiles.end() ? policy_for(user) : policy_for(user).with(it->second);
}

std::string describe_for_box(const EgressPolicy& policy) {
  if (policy.allow.empty())
    return "none. Only localhost inside this environment is reachable; downloads and API calls fail.";
  auto list = [](const std::vector<HostRule>& rules) {
    std::string out;
    for (const HostRule& r : rules) out += (out.empty() ? "" : ", ") + r.to_string();
    return out;
  };
  std::string text =
      "only these hosts, through the proxy already set in HTTP_PROXY/HTTPS_PROXY (git, npm, pip "
      "and curl use it): " +
      list(policy.allow);
  if (!policy.deny.empty()) text += "; never " + list(policy.deny);
  return text +
         ". Anything else is refused with a 403 that says why; private and local addresses are "
         "refused too.";
}

Verdict check_name(const EgressPolicy& policy, std::string_view host, uint16_t port) {
  for (const HostRule& rule : policy.deny)
    if (rule.matches(host, port))
      return {false, "agentbox: " + where(host, port) + " is denied by this sandbox's network policy (rule \"" +
                         rule.to_string() + "\")"};
  for (const HostRule& rule : policy.allow)
    if (rule.matches(host, port)) return {true, "allowed by \"" + rule.to_string() + "\""};
  return {false, "agentbox: " + where(host, port) + " is not in this sandbox's network allowlist"};
}

Verdict check_address(const EgressPolicy& policy, std::string_view host, uint16_t port, const IpAddress& address,
                      const std::vector<IpAddress>& host_addresses) {
  AddressKind kind = classify(address);
  if (kind != AddressKind::loopback && holds(host_addresses, address)) kind = AddressKind::host_own;
  if (kind == AddressKind::global) return {true, "a public address"};
  // The host itself (0.0.0.0 connects to it too) only by its own entry: a range that merely
  // holds it (10.0.0.0/8 for the office network) is a network allowed, not the host on it.
  const bool named_only = kind == AddressKind::host_own || kind == AddressKind::unspecified;
  for (const AddressRange& range : policy.allow_addresses)
    if (range.contains(address) && (!named_only || range.is_one_address()))
      return {true, "allowed by allow_addresses \"" + range.to_string() + "\""};
  std::string target = address.unmapped().to_string();
  std::string what = target == host ? " is " : " resolves to " + target + ", ";
  return {false, "agentbox: " + where(host, port) + what + std::string(describe(kind)) + " this sandbox may not reach"};
}

}  // namespace agentbox::net
