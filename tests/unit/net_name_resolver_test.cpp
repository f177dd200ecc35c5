// Lookups on the resolver's own threads: names from /etc/hosts and IP literals (no test here
// asks a DNS server: CI has none).
#include "net/name_resolver.hpp"

#include <gtest/gtest.h>

#include <future>

namespace agentbox::net {
namespace {

using tcp = boost::asio::ip::tcp;

std::pair<boost::system::error_code, std::vector<tcp::endpoint>> lookup(NameResolver& r, const std::string& host) {
  std::promise<std::pair<boost::system::error_code, std::vector<tcp::endpoint>>> p;
  r.resolve("alice", host, 443, [&](boost::system::error_code ec, std::vector<tcp::endpoint> found) {
    p.set_value({ec, std::move(found)});
  });
  return p.get_future().get();
}

TEST(NameResolver, ResolvesNamesFromTheHostsFileWithThePort) {
  NameResolver r;
  auto [ec, found] = lookup(r, "localhost");
  ASSERT_FALSE(ec) << ec.message();
  bool v4 = false;
  for (const tcp::endpoint& e : found) {
    EXPECT_EQ(e.port(), 443);
    if (e.address() == boost::asio::ip::make_address("127.0.0.1")) v4 = true;
  }
  EXPECT_TRUE(v4);
}

TEST(NameResolver, LiteralsComeBackAsThemselves) {
  NameResolver r;
  auto [ec, found] = lookup(r, "::1");
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], tcp::endpoint(boost::asio::ip::make_address("::1"), 443));
}

TEST(NameResolver, ManyLookupsOfManyAccountsAllAnswer) {
  NameResolver r(2, 1);
  std::atomic<int> answered{0};
  std::promise<void> all;
  for (int i = 0; i < 100; ++i)
    r.resolve("account" + std::to_string(i % 7), "127.0.0.1", 80, [&](boost::system::error_code ec, auto found) {
      EXPECT_FALSE(ec);
      EXPECT_EQ(found.size(), 1u);
      if (++answered == 100) all.set_value();
    });
  all.get_future().get();
  EXPECT_EQ(answered, 100);
}

}  // namespace
}  // namespace agentbox::net
