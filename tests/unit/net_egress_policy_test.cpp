// The egress policy's verdicts: host rules with wildcards and ports, deny over allow, nothing
// without an allow rule, and the address stage that keeps names from leading somewhere private.
#include "net/egress_policy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/error.hpp"

namespace agentbox::net {
namespace {

using ::testing::HasSubstr;

EgressPolicy policy(std::vector<std::string> allow, std::vector<std::string> deny = {},
                    std::vector<std::string> addresses = {}) {
  EgressPolicy p;
  for (const std::string& a : allow) p.allow.push_back(HostRule::parse(a));
  for (const std::string& d : deny) p.deny.push_back(HostRule::parse(d));
  for (const std::string& r : addresses) p.allow_addresses.push_back(AddressRange::parse(r));
  return p;
}

bool allowed(const EgressPolicy& p, std::string_view host, uint16_t port) {
  std::optional<std::string> h = normalize_host(host);
  EXPECT_TRUE(h) << host;
  return check_name(p, *h, port).allowed;
}

std::string rule_error(std::string_view text) {
  try {
    HostRule::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(EgressPolicy, NoAllowRuleMeansNoEgress) {
  EgressPolicy none;
  Verdict v = check_name(none, "example.com", 443);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason, "agentbox: example.com:443 is not in this sandbox's network allowlist");
}

TEST(EgressPolicy, HostsPortsAndWildcards) {
  EgressPolicy p = policy({"registry.npmjs.org", "*.pypi.org", "github.com:443"});
  EXPECT_TRUE(allowed(p, "registry.npmjs.org", 443));
  EXPECT_TRUE(allowed(p, "registry.npmjs.org", 80));    // no port in the rule: every port
  EXPECT_TRUE(allowed(p, "REGISTRY.npmjs.org.", 443));  // case and the root dot do not matter
  EXPECT_FALSE(allowed(p, "evil-registry.npmjs.org", 443));
  EXPECT_FALSE(allowed(p, "registry.npmjs.org.evil.com", 443));
  EXPECT_TRUE(allowed(p, "files.pypi.org", 443));
  EXPECT_TRUE(allowed(p, "a.b.pypi.org", 443));
  EXPECT_FALSE(allowed(p, "pypi.org", 443));  // "*." needs a label in front
  EXPECT_FALSE(allowed(p, "pypi.org.evil.com", 443));
  EXPECT_FALSE(allowed(p, "evilpypi.org", 443));
  EXPECT_TRUE(allowed(p, "github.com", 443));
  EXPECT_FALSE(allowed(p, "github.com", 22));
  EXPECT_FALSE(allowed(p, "api.github.com", 443));
}

TEST(EgressPolicy, DenyWinsOverAllowAndSaysWhichRule) {
  EgressPolicy p = policy({"*"}, {"*.internal", "example.com:25"});
  EXPECT_TRUE(allowed(p, "example.com", 443));
  EXPECT_FALSE(allowed(p, "example.com", 25));
  Verdict v = check_name(p, "db.corp.internal", 5432);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason,
            "agentbox: db.corp.internal:5432 is denied by this sandbox's network policy (rule \"*.internal\")");
}

TEST(EgressPolicy, IpLiteralsMatchOnlyRulesWrittenAsThatAddress) {
  EgressPolicy p = policy({"203.0.113.7", "[2001:db8::1]:443", "*.example.com"});
  EXPECT_TRUE(allowed(p, "203.0.113.7", 80));
  EXPECT_FALSE(allowed(p, "203.0.113.8", 80));
  EXPECT_TRUE(allowed(p, "[2001:DB8:0::1]", 443));
  EXPECT_FALSE(allowed(p, "2001:db8::1", 80));
  EXPECT_FALSE(allowed(p, "203.0.113.7.example.com.evil", 80));
}

TEST(EgressPolicy, TheAddressStageRefusesPrivatePlacesUnlessARangeAllowsThem) {
  EgressPolicy p = policy({"*.example.com"}, {}, {"127.0.0.1/32"});
  IpAddress metadata = *IpAddress::parse("169.254.169.254");
  Verdict v = check_address(p, "x.example.com", 80, metadata);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason,
            "agentbox: x.example.com:80 resolves to 169.254.169.254, a link-local address (cloud metadata lives "
            "there) this sandbox may not reach");
  EXPECT_FALSE(check_address(p, "x.example.com", 80, *IpAddress::parse("10.0.0.1")).allowed);
  EXPECT_FALSE(check_address(p, "x.example.com", 80, *IpAddress::parse("127.0.0.2")).allowed);
  EXPECT_FALSE(check_address(p, "x.example.com", 80, *IpAddress::parse("::ffff:10.0.0.1")).allowed);
  EXPECT_TRUE(check_address(p, "x.example.com", 80, *IpAddress::parse("127.0.0.1")).allowed);
  EXPECT_TRUE(check_address(p, "x.example.com", 80, *IpAddress::parse("::ffff:127.0.0.1")).allowed);
  EXPECT_TRUE(check_address(p, "x.example.com", 80, *IpAddress::parse("93.184.215.14")).allowed);
  EXPECT_EQ(check_address(p, "x.example.com", 80, *IpAddress::parse("203.0.113.7")).reason,
            "agentbox: x.example.com:80 resolves to 203.0.113.7, a reserved (documentation, benchmarking or relay) "
            "address this sandbox may not reach");

  Verdict literal = check_address(p, "10.0.0.1", 80, *IpAddress::parse("10.0.0.1"));
  EXPECT_EQ(literal.reason, "agentbox: 10.0.0.1:80 is a private address this sandbox may not reach");
}

// The proxy connects from the host's namespace: an address bound there leads to the host's own
// services (those on 0.0.0.0 among them), whatever its kind. Only an allow_addresses entry that
// names that very address opens it; a range that merely holds it is a network, not the host.
TEST(EgressPolicy, TheHostsOwnAddressesAreRefusedUnlessAnEntryNamesThem) {
  const std::vector<IpAddress> host = {*IpAddress::parse("127.0.0.1"), *IpAddress::parse("93.184.215.14"),
                                       *IpAddress::parse("10.1.2.3"), *IpAddress::parse("fd00::2")};
  EgressPolicy p = policy({"*"}, {}, {"10.0.0.0/8", "fd00::/8", "127.0.0.1/32"});
  Verdict publicly = check_address(p, "self.example.com", 443, *IpAddress::parse("93.184.215.14"), host);
  EXPECT_FALSE(publicly.allowed);
  EXPECT_EQ(publicly.reason,
            "agentbox: self.example.com:443 resolves to 93.184.215.14, an address of the host itself this sandbox "
            "may not reach");
  EXPECT_EQ(check_address(p, "93.184.215.14", 443, *IpAddress::parse("93.184.215.14"), host).reason,
            "agentbox: 93.184.215.14:443 is an address of the host itself this sandbox may not reach");
  EXPECT_FALSE(check_address(p, "x", 80, *IpAddress::parse("::ffff:93.184.215.14"), host).allowed);
  // In a range allowed, still the host's:
  EXPECT_FALSE(check_address(p, "x", 80, *IpAddress::parse("10.1.2.3"), host).allowed);
  EXPECT_FALSE(check_address(p, "x", 80, *IpAddress::parse("fd00::2"), host).allowed);
  // ...while the rest of that range is the operator's to open, and other public places are public.
  EXPECT_TRUE(check_address(p, "x", 80, *IpAddress::parse("10.1.2.4"), host).allowed);
  EXPECT_TRUE(check_address(p, "x", 80, *IpAddress::parse("93.184.215.15"), host).allowed);
  // Loopback keeps its own rule: the range that allows it allows it.
  EXPECT_TRUE(check_address(p, "x", 80, *IpAddress::parse("127.0.0.1"), host).allowed);
  // 0.0.0.0 connects to the host too: a range holding it (everything) does not open it.
  EXPECT_FALSE(check_address(policy({"*"}, {}, {"0.0.0.0/0"}), "x", 80, *IpAddress::parse("0.0.0.0"), host).allowed);

  EgressPolicy named = policy({"*"}, {}, {"10.0.0.0/8", "10.1.2.3/32", "93.184.215.14", "fd00::2/128"});
  for (const char* address : {"10.1.2.3", "93.184.215.14", "fd00::2", "::ffff:10.1.2.3"}) {
    Verdict v = check_address(named, "x", 80, *IpAddress::parse(address), host);
    EXPECT_TRUE(v.allowed) << address;
    EXPECT_THAT(v.reason, HasSubstr("allowed by allow_addresses")) << address;
  }
}

TEST(EgressPolicy, AUsersAdditionsAddToTheDefault) {
  EgressConfig config;
  config.default_policy = policy({"registry.npmjs.org"}, {"*.internal"});
  config.users["alice"] = policy({"huggingface.co", "x.internal"});
  EgressPolicy alice = config.policy_for("alice");
  EXPECT_TRUE(allowed(alice, "huggingface.co", 443));
  EXPECT_TRUE(allowed(alice, "registry.npmjs.org", 443));
  EXPECT_FALSE(allowed(alice, "x.internal", 443));  // the default's deny still wins
  EgressPolicy bob = config.policy_for("bob");
  EXPECT_FALSE(allowed(bob, "huggingface.co", 443));
  EXPECT_TRUE(allowed(bob, "registry.npmjs.org", 443));
}

TEST(EgressPolicy, AProfilesRulesAddToTheUsersAndItsDenyWins) {
  EgressConfig config;
  config.default_policy = policy({"registry.npmjs.org"});
  config.users["alice"] = policy({"ref.test", "crates.io"});
  config.profiles["locked"] = policy({"pypi.org"}, {"ref.test"});
  EgressPolicy locked = config.policy_for("alice", "locked");
  EXPECT_FALSE(allowed(locked, "ref.test", 443));  // the profile's deny over the user's allow
  EXPECT_TRUE(allowed(locked, "crates.io", 443));
  EXPECT_TRUE(allowed(locked, "pypi.org", 443));
  EXPECT_TRUE(allowed(locked, "registry.npmjs.org", 443));
  // The default profile, and a profile without rules: the user's policy as it was.
  EXPECT_TRUE(allowed(config.policy_for("alice", ""), "ref.test", 443));
  EXPECT_TRUE(allowed(config.policy_for("alice", "other"), "ref.test", 443));
  EXPECT_FALSE(allowed(config.policy_for("alice", ""), "pypi.org", 443));
}

TEST(EgressPolicy, MalformedHostsAreNotHosts) {
  for (std::string_view host :
       {"", ".", "a b.com", "exa$mple.com", ".example.com", "a..b", "ex*ample.com", "http://x", "x/y", "evil.com.."})
    EXPECT_FALSE(normalize_host(host)) << host;
  EXPECT_FALSE(normalize_host(std::string(254, 'a')));
  EXPECT_EQ(normalize_host("Example.COM."), "example.com");
}

TEST(HostRule, ParsesTheFormsTheConfigDocumentsAndRefusesTyposSayingWhy) {
  EXPECT_EQ(HostRule::parse("GitHub.com:443").to_string(), "github.com:443");
  EXPECT_EQ(HostRule::parse("*.pypi.org").to_string(), "*.pypi.org");
  EXPECT_EQ(HostRule::parse("[2001:db8::1]:8443").to_string(), "[2001:db8::1]:8443");
  EXPECT_EQ(HostRule::parse("2001:db8::1").to_string(), "2001:db8::1");
  EXPECT_THAT(rule_error("github.com:"), HasSubstr("port after ':' is missing"));
  EXPECT_THAT(rule_error("github.com:0"), HasSubstr("from 1 to 65535"));
  EXPECT_THAT(rule_error("github.com:99999"), HasSubstr("from 1 to 65535"));
  EXPECT_THAT(rule_error("https://github.com"), HasSubstr("is not a host rule"));
  EXPECT_THAT(rule_error("github.com/org"), HasSubstr("'/' cannot appear"));
  EXPECT_THAT(rule_error(""), HasSubstr("empty"));
  EXPECT_THAT(rule_error("[2001:db8::1"), HasSubstr("must close"));
  EXPECT_THAT(rule_error("[example.com]:443"), HasSubstr("not an IPv6 address"));
}

TEST(HostRule, ManyWildcardsAgainstALongName) {
  HostRule r = HostRule::parse("*a*a*a*a*a*a*a*a*a*a*b");
  std::string host(250, 'a');
  EXPECT_FALSE(r.matches(host, 80));
  EXPECT_TRUE(r.matches(host + "b", 80));
}

}  // namespace
}  // namespace agentbox::net
