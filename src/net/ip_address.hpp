#pragma once
// IP addresses as the egress policy sees them: parsed from text, compared against CIDR ranges,
// and sorted into the kinds of place a box may not reach unless a rule says so (loopback, cloud
// metadata on link-local, private networks, CGNAT, multicast, the unspecified address, and the
// reserved ranges no public host holds: documentation, benchmarking, the 6to4 relay anycast).
// An IPv4 address written as IPv6 (::ffff:a.b.c.d) is the IPv4 address it names: the kernel
// connects to that, so the policy judges that.
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox::net {

struct IpAddress {
  int family = AF_INET;             // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // network order; IPv4 uses the first 4

  // "192.0.2.1", "2001:db8::1", "[2001:db8::1]"; nullopt for anything else (no names, no
  // shorthand like "127.1", no zone ids).
  static std::optional<IpAddress> parse(std::string_view text);
  static IpAddress from_sockaddr(const sockaddr* sa);

  size_t size() const { return family == AF_INET ? 4 : 16; }
  std::string to_string() const;  // canonical text, IPv6 without brackets
  // The IPv4 address an IPv4-mapped IPv6 address names; itself otherwise.
  IpAddress unmapped() const;
  // A sockaddr_in/sockaddr_in6 for connect(); returns its length.
  socklen_t to_sockaddr(uint16_t port, sockaddr_storage& out) const;

  bool operator==(const IpAddress&) const = default;
};

// address (unmapped) is one of set's, which holds IPv4 addresses as IPv4.
bool holds(const std::vector<IpAddress>& set, const IpAddress& address);

// The places a box is kept from unless an address rule allows them.
enum class AddressKind {
  global,       // everything else: reachable when the name is allowed
  loopback,     // 127.0.0.0/8, ::1
  link_local,   // 169.254.0.0/16 (cloud metadata), fe80::/10
  private_net,  // 10/8, 172.16/12, 192.168/16, fc00::/7, and 0/8, 240/4 (never routed)
  cgnat,        // 100.64.0.0/10
  multicast,    // 224.0.0.0/4, ff00::/8, 255.255.255.255
  unspecified,  // 0.0.0.0, ::
  reserved,     // documentation (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20),
                // benchmarking (198.18/15), 6to4 relay anycast (192.88.99/24): no public host
                // is there, so whatever answers is local to someone (often the host itself)
  host_own,     // bound to an interface of the namespace the proxy connects from (never from
                // classify(): HostAddresses knows, check_address asks it)
};
AddressKind classify(const IpAddress& address);
std::string_view describe(AddressKind kind);  // "a private address", ...

// A CIDR range; a bare address is the range holding only itself.
struct AddressRange {
  IpAddress base;  // host bits zero
  int prefix = 32;

  // "10.0.0.0/8", "fd00::/8", "127.0.0.1"; throws Error saying what is wrong (host bits set
  // are refused: "10.0.0.1/8" is more likely a typo than a range).
  static AddressRange parse(std::string_view text);
  bool contains(const IpAddress& address) const;
  bool is_one_address() const { return prefix == static_cast<int>(base.size()) * 8; }
  std::string to_string() const;
};

}  // namespace agentbox::net
