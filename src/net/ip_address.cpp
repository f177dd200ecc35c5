#include "net/ip_address.hpp"

#include <arpa/inet.h>

#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <cstring>

#include "util/error.hpp"

namespace agentbox::net {
namespace {

IpAddress v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddress ip;
  ip.bytes[0] = a, ip.bytes[1] = b, ip.bytes[2] = c, ip.bytes[3] = d;
  return ip;
}

bool in_prefix(const IpAddress& address, const IpAddress& base, int prefix) {
  if (address.family != base.family) return false;
  int full = prefix / 8, rest = prefix % 8;
  if (std::memcmp(address.bytes.data(), base.bytes.data(), static_cast<size_t>(full)) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (address.bytes[full] & mask) == (base.bytes[full] & mask);
}

struct KindRange {
  IpAddress base;
  int prefix;
  AddressKind kind;
};

// Checked in order; the first match wins. IPv6 forms that carry an IPv4 address are
// classified by that address (see classify).
const KindRange kV4Ranges[] = {
    {v4(0, 0, 0, 0), 32, AddressKind::unspecified},
    {v4(255, 255, 255, 255), 32, AddressKind::multicast},  // limited broadcast
    {v4(0, 0, 0, 0), 8, AddressKind::private_net},         // "this network": never routed
    {v4(10, 0, 0, 0), 8, AddressKind::private_net},
    {v4(100, 64, 0, 0), 10, AddressKind::cgnat},
    {v4(127, 0, 0, 0), 8, AddressKind::loopback},
    {v4(169, 254, 0, 0), 16, AddressKind::link_local},
    {v4(172, 16, 0, 0), 12, AddressKind::private_net},
    {v4(192, 0, 0, 0), 24, AddressKind::private_net},  // IETF protocol assignments
    {v4(192, 0, 2, 0), 24, AddressKind::reserved},     // TEST-NET-1
    {v4(192, 88, 99, 0), 24, AddressKind::reserved},   // 6to4 relay anycast (deprecated)
    {v4(192, 168, 0, 0), 16, AddressKind::private_net},
    {v4(198, 18, 0, 0), 15, AddressKind::reserved},    // benchmarking, often internal
    {v4(198, 51, 100, 0), 24, AddressKind::reserved},  // TEST-NET-2
    {v4(203, 0, 113, 0), 24, AddressKind::reserved},   // TEST-NET-3
    {v4(224, 0, 0, 0), 4, AddressKind::multicast},
    {v4(240, 0, 0, 0), 4, AddressKind::private_net},  // reserved: never routed
};

IpAddress v6(std::string_view text) { return *IpAddress::parse(text); }

const KindRange kV6Ranges[] = {
    {v6("::"), 128, AddressKind::unspecified},
    {v6("::1"), 128, AddressKind::loopback},
    {v6("fe80::"), 10, AddressKind::link_local},
    {v6("fec0::"), 10, AddressKind::private_net},  // site-local, deprecated but routable inside
    {v6("fc00::"), 7, AddressKind::private_net},
    {v6("ff00::"), 8, AddressKind::multicast},
    {v6("::"), 96, AddressKind::private_net},       // IPv4-compatible, deprecated
    {v6("2001:db8::"), 32, AddressKind::reserved},  // documentation
    {v6("3fff::"), 20, AddressKind::reserved},      // documentation (RFC 9637)
};

// IPv6 addresses that reach an IPv4 address through a translator or tunnel: the IPv4
// address is where the packet ends up. offset: where the IPv4 bytes sit.
struct EmbeddedV4 {
  IpAddress base;
  int prefix;
  size_t offset;
};
const EmbeddedV4 kEmbeddedV4[] = {
    {v6("::ffff:0:0"), 96, 12},   // IPv4-mapped
    {v6("64:ff9b::"), 96, 12},    // NAT64 well-known prefix
    {v6("64:ff9b:1::"), 48, 12},  // NAT64 local-use prefix
    {v6("2002::"), 16, 2},        // 6to4
};

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  if (text.empty() || text.size() > INET6_ADDRSTRLEN) return std::nullopt;
  std::string s(text);
  IpAddress ip;
  if (::inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET;
    return ip;
  }
  if (::inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET6;
    return ip;
  }
  return std::nullopt;
}

IpAddress IpAddress::from_sockaddr(const sockaddr* sa) {
  IpAddress ip;
  if (sa->sa_family == AF_INET) {
    ip.family = AF_INET;
    std::memcpy(ip.bytes.data(), &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else {
    ip.family = AF_INET6;
    std::memcpy(ip.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  }
  return ip;
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  ::inet_ntop(family, bytes.data(), buf, sizeof buf);
  return buf;
}

IpAddress IpAddress::unmapped() const {
  if (family != AF_INET6 || !in_prefix(*this, kEmbeddedV4[0].base, 96)) return *this;
  IpAddress ip;
  std::memcpy(ip.bytes.data(), bytes.data() + 12, 4);
  return ip;
}

socklen_t IpAddress::to_sockaddr(uint16_t port, sockaddr_storage& out) const {
  std::memset(&out, 0, sizeof out);
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&out);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    std::memcpy(&sin->sin_addr, bytes.data(), 4);
    return sizeof(sockaddr_in);
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  std::memcpy(&sin6->sin6_addr, bytes.data(), 16);
  return sizeof(sockaddr_in6);
}

bool holds(const std::vector<IpAddress>& set, const IpAddress& address) {
  return std::find(set.begin(), set.end(), address.unmapped()) != set.end();
}

AddressKind classify(const IpAddress& address) {
  if (address.family == AF_INET6) {
    for (const EmbeddedV4& e : kEmbeddedV4) {
      if (!in_prefix(address, e.base, e.prefix)) continue;
      IpAddress inner;
      std::memcpy(inner.bytes.data(), address.bytes.data() + e.offset, 4);
      return classify(inner);
    }
    for (const KindRange& r : kV6Ranges)
      if (in_prefix(address, r.base, r.prefix)) return r.kind;
    return AddressKind::global;
  }
  for (const KindRange& r : kV4Ranges)
    if (in_prefix(address, r.base, r.prefix)) return r.kind;
  return AddressKind::global;
}

std::string_view describe(AddressKind kind) {
  switch (kind) {
    case AddressKind::global: return "a public address";
    case AddressKind::loopback: return "a loopback address";
    case AddressKind::link_local: return "a link-local address (cloud metadata lives there)";
    case AddressKind::private_net: return "a private address";
    case AddressKind::cgnat: return "a carrier-grade NAT address";
    case AddressKind::multicast: return "a multicast or broadcast address";
    case AddressKind::unspecified: return "the unspecified address";
    case AddressKind::reserved: return "a reserved (documentation, benchmarking or relay) address";
    case AddressKind::host_own: return "an address of the host itself";
  }
  return "an address";
}

AddressRange AddressRange::parse(std::string_view text) {
  auto bad = [&](std::string_view why) { return Error(fmt::format("\"{}\" is not an address range: {}", text, why)); };
  size_t slash = text.find('/');
  std::optional<IpAddress> base = IpAddress::parse(text.substr(0, slash));
  if (!base) throw bad("expected an IP address or CIDR like 10.0.0.0/8");
  int max = base->family == AF_INET ? 32 : 128;
  int prefix = max;
  if (slash != std::string_view::npos) {
    std::string_view digits = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || prefix < 0 || prefix > max)
      throw bad("the prefix length must be a number from 0 to " + std::to_string(max));
  }
  AddressRange range{*base, prefix};
  IpAddress masked = *base;
  for (size_t i = 0; i < masked.size(); ++i) {
    int bits = std::min(8, std::max(0, prefix - static_cast<int>(i) * 8));
    masked.bytes[i] &= static_cast<uint8_t>(bits == 0 ? 0 : 0xFF << (8 - bits));
  }
  if (!(masked == *base))
    throw bad("bits are set past the prefix (did you mean " + masked.to_string() + "/" + std::to_string(prefix) + "?)");
  return range;
}

bool AddressRange::contains(const IpAddress& address) const { return in_prefix(address.unmapped(), base, prefix); }

std::string AddressRange::to_string() const { return base.to_string() + "/" + std::to_string(prefix); }

}  // namespace agentbox::net
