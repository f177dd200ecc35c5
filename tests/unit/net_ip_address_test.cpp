// IP addresses for the egress policy: parsing, the kinds of place a box is kept from, CIDRs.
#include "net/ip_address.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/error.hpp"

namespace agentbox::net {
namespace {

using ::testing::HasSubstr;

AddressKind kind_of(std::string_view text) {
  std::optional<IpAddress> ip = IpAddress::parse(text);
  EXPECT_TRUE(ip) << text;
  return ip ? classify(*ip) : AddressKind::global;
}

TEST(IpAddress, ParsesBothFamiliesAndPrintsCanonically) {
  EXPECT_EQ(IpAddress::parse("192.0.2.1")->to_string(), "192.0.2.1");
  EXPECT_EQ(IpAddress::parse("2001:DB8:0:0::1")->to_string(), "2001:db8::1");
  EXPECT_EQ(IpAddress::parse("[::1]")->family, AF_INET6);
}

TEST(IpAddress, RefusesNamesAndShorthands) {
  // getaddrinfo would take "127.1" and "2130706433" as 127.0.0.1: they are names to the
  // policy, and their resolved address is judged like any other.
  for (std::string_view text : {"", "localhost", "127.1", "2130706433", "0x7f.0.0.1", "1.2.3.4.5", "fe80::1%eth0",
                                "[1.2.3.4]x", "::ffff:1.2.3.4.5"})
    EXPECT_FALSE(IpAddress::parse(text)) << text;
}

TEST(IpAddress, ClassifiesThePlacesABoxIsKeptFrom) {
  EXPECT_EQ(kind_of("127.0.0.1"), AddressKind::loopback);
  EXPECT_EQ(kind_of("127.255.0.9"), AddressKind::loopback);
  EXPECT_EQ(kind_of("::1"), AddressKind::loopback);
  EXPECT_EQ(kind_of("169.254.169.254"), AddressKind::link_local);
  EXPECT_EQ(kind_of("fe80::1"), AddressKind::link_local);
  EXPECT_EQ(kind_of("10.0.0.1"), AddressKind::private_net);
  EXPECT_EQ(kind_of("172.16.0.1"), AddressKind::private_net);
  EXPECT_EQ(kind_of("172.31.255.255"), AddressKind::private_net);
  EXPECT_EQ(kind_of("192.168.1.1"), AddressKind::private_net);
  EXPECT_EQ(kind_of("fd00::1"), AddressKind::private_net);
  EXPECT_EQ(kind_of("100.64.0.1"), AddressKind::cgnat);
  EXPECT_EQ(kind_of("100.127.255.255"), AddressKind::cgnat);
  EXPECT_EQ(kind_of("224.0.0.1"), AddressKind::multicast);
  EXPECT_EQ(kind_of("255.255.255.255"), AddressKind::multicast);
  EXPECT_EQ(kind_of("ff02::1"), AddressKind::multicast);
  EXPECT_EQ(kind_of("0.0.0.0"), AddressKind::unspecified);
  EXPECT_EQ(kind_of("::"), AddressKind::unspecified);
  EXPECT_EQ(kind_of("0.1.2.3"), AddressKind::private_net);
  EXPECT_EQ(kind_of("240.0.0.1"), AddressKind::private_net);
}

// No public host holds a documentation, benchmarking or 6to4 relay address: whatever answers
// there is someone's local network, often the host itself (issue 30).
TEST(IpAddress, DocumentationBenchmarkingAndRelayRangesAreReserved) {
  for (std::string_view text :
       {"192.0.2.0", "192.0.2.255", "198.51.100.1", "203.0.113.7", "203.0.113.255", "192.88.99.1", "198.18.0.0",
        "198.19.255.255", "2001:db8::1", "2001:db8:ffff:ffff::1", "3fff::1", "3fff:fff:ffff::1", "::ffff:203.0.113.7",
        "2002:c000:0201::1" /* 6to4 of 192.0.2.1 */, "64:ff9b::198.51.100.9"})
    EXPECT_EQ(kind_of(text), AddressKind::reserved) << text;
  EXPECT_EQ(describe(AddressKind::reserved), "a reserved (documentation, benchmarking or relay) address");
}

TEST(IpAddress, PublicAddressesAreGlobalAtTheEdgesOfPrivateAndReservedRanges) {
  for (std::string_view text :
       {"9.255.255.255",   "11.0.0.0",        "172.15.255.255",   "172.32.0.0",  "100.63.255.255", "100.128.0.0",
        "169.253.255.255", "2606:4700::1111", "126.255.255.255",  "128.0.0.0",   "192.0.1.255",    "192.0.3.0",
        "192.88.98.255",   "192.88.100.0",    "198.17.255.255",   "198.20.0.0",  "198.51.99.255",  "198.51.101.0",
        "203.0.112.255",   "203.0.114.0",     "2001:db7:ffff::1", "2001:db9::1", "3ffe:ffff::1",   "3fff:1000::1"})
    EXPECT_EQ(kind_of(text), AddressKind::global) << text;
}

TEST(IpAddress, IPv6FormsThatReachAnIPv4AddressAreJudgedByIt) {
  // The kernel sends ::ffff:127.0.0.1 to 127.0.0.1; NAT64 and 6to4 gateways forward to the
  // embedded address.
  EXPECT_EQ(kind_of("::ffff:127.0.0.1"), AddressKind::loopback);
  EXPECT_EQ(kind_of("::ffff:169.254.169.254"), AddressKind::link_local);
  EXPECT_EQ(kind_of("64:ff9b::10.0.0.1"), AddressKind::private_net);
  EXPECT_EQ(kind_of("64:ff9b::a9fe:a9fe"), AddressKind::link_local);
  EXPECT_EQ(kind_of("2002:a00:1::1"), AddressKind::private_net);  // 6to4 of 10.0.0.1
  EXPECT_EQ(kind_of("::ffff:93.184.215.14"), AddressKind::global);
  EXPECT_EQ(IpAddress::parse("::ffff:10.1.2.3")->unmapped().to_string(), "10.1.2.3");
}

TEST(AddressRange, ContainsWhatItsPrefixCovers) {
  AddressRange r = AddressRange::parse("10.0.0.0/8");
  EXPECT_TRUE(r.contains(*IpAddress::parse("10.255.1.2")));
  EXPECT_FALSE(r.contains(*IpAddress::parse("11.0.0.0")));
  EXPECT_TRUE(r.contains(*IpAddress::parse("::ffff:10.0.0.1")));  // as the kernel would connect
  EXPECT_FALSE(r.contains(*IpAddress::parse("::1")));

  AddressRange one = AddressRange::parse("127.0.0.1");
  EXPECT_EQ(one.to_string(), "127.0.0.1/32");
  EXPECT_TRUE(one.contains(*IpAddress::parse("127.0.0.1")));
  EXPECT_FALSE(one.contains(*IpAddress::parse("127.0.0.2")));

  AddressRange odd = AddressRange::parse("172.16.0.0/12");
  EXPECT_TRUE(odd.contains(*IpAddress::parse("172.31.0.1")));
  EXPECT_FALSE(odd.contains(*IpAddress::parse("172.32.0.1")));

  AddressRange v6 = AddressRange::parse("fd00::/8");
  EXPECT_TRUE(v6.contains(*IpAddress::parse("fd12::3")));
  EXPECT_FALSE(v6.contains(*IpAddress::parse("fe00::3")));
  EXPECT_TRUE(AddressRange::parse("0.0.0.0/0").contains(*IpAddress::parse("8.8.8.8")));
}

TEST(AddressRange, RefusesWhatIsNotARangeSayingWhy) {
  auto message = [](std::string_view text) {
    try {
      AddressRange::parse(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(message("10.0.0.1/8"), HasSubstr("did you mean 10.0.0.0/8"));
  EXPECT_THAT(message("10.0.0.0/33"), HasSubstr("from 0 to 32"));
  EXPECT_THAT(message("fd00::/129"), HasSubstr("from 0 to 128"));
  EXPECT_THAT(message("10.0.0.0/"), HasSubstr("prefix length"));
  EXPECT_THAT(message("10.0.0.0/8x"), HasSubstr("prefix length"));
  EXPECT_THAT(message("example.com/24"), HasSubstr("expected an IP address"));
  EXPECT_THAT(message(""), HasSubstr("expected an IP address"));
}

TEST(IpAddress, ASetHoldsAnAddressInEitherForm) {
  std::vector<IpAddress> set = {*IpAddress::parse("192.0.2.2"), *IpAddress::parse("fd00::2")};
  EXPECT_TRUE(holds(set, *IpAddress::parse("192.0.2.2")));
  EXPECT_TRUE(holds(set, *IpAddress::parse("::ffff:192.0.2.2")));  // the kernel connects to 192.0.2.2
  EXPECT_TRUE(holds(set, *IpAddress::parse("fd00::2")));
  EXPECT_FALSE(holds(set, *IpAddress::parse("192.0.2.3")));
  EXPECT_FALSE(holds({}, *IpAddress::parse("192.0.2.2")));
  EXPECT_TRUE(AddressRange::parse("192.0.2.2/32").is_one_address());
  EXPECT_TRUE(AddressRange::parse("fd00::2").is_one_address());
  EXPECT_FALSE(AddressRange::parse("192.0.2.0/24").is_one_address());
  EXPECT_FALSE(AddressRange::parse("fd00::/127").is_one_address());
}

TEST(IpAddress, SockaddrRoundTrips) {
  sockaddr_storage ss;
  IpAddress a = *IpAddress::parse("203.0.113.9");
  ASSERT_EQ(a.to_sockaddr(443, ss), sizeof(sockaddr_in));
  EXPECT_EQ(ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port), 443);
  EXPECT_EQ(IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss)), a);
  IpAddress b = *IpAddress::parse("2001:db8::7");
  ASSERT_EQ(b.to_sockaddr(80, ss), sizeof(sockaddr_in6));
  EXPECT_EQ(IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss)), b);
}

}  // namespace
}  // namespace agentbox::net
