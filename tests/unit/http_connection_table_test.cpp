// ConnectionTable (http/connection_table.hpp) without sockets: which connection makes room
// for a new one, when a newcomer is refused instead, how addresses are counted, and that a
// place is given back exactly once, whoever holds the slot.
#include "http/connection_table.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace agentbox::http {
namespace {

using boost::asio::ip::make_address;

// A connection as the table sees it: its slot, and whether the table closed it.
struct Conn {
  ConnectionSlot slot;
  std::shared_ptr<bool> evicted = std::make_shared<bool>(false);
};

Conn open(ConnectionTable& table, const char* address, ConnectionTable::Refusal* refused = nullptr) {
  auto admission = table.admit(make_address(address));
  if (refused) *refused = admission.refused;
  Conn c{std::move(admission.slot)};
  c.slot.on_evict([flag = c.evicted] { *flag = true; });
  return c;
}

void later() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }  // a distinct idle_since

TEST(ConnectionTable, BelowTheLimitsEveryConnectionIsAdmittedAndCounted) {
  auto table = ConnectionTable::create({.total = 4, .per_address = 2});
  std::vector<Conn> conns;
  for (const char* a : {"192.0.2.1", "192.0.2.1", "192.0.2.2", "198.51.100.7"}) conns.push_back(open(*table, a));
  for (const Conn& c : conns) {
    EXPECT_TRUE(c.slot);
    EXPECT_FALSE(*c.evicted);
  }
  EXPECT_EQ(table->size(), 4u);
  EXPECT_EQ(table->size_of(make_address("192.0.2.1")), 2u);
  conns.erase(conns.begin());  // a slot destroyed gives its place back
  EXPECT_EQ(table->size(), 3u);
  EXPECT_EQ(table->size_of(make_address("192.0.2.1")), 1u);
  conns.clear();
  EXPECT_EQ(table->size(), 0u);
}

TEST(ConnectionTable, AFullTableClosesTheOldestIdleConnectionUnauthenticatedFirst) {
  auto table = ConnectionTable::create({.total = 3, .per_address = 3});
  Conn authed = open(*table, "192.0.2.1");
  authed.slot.authenticated();
  later();
  Conn older = open(*table, "192.0.2.2");
  later();
  Conn newer = open(*table, "192.0.2.3");
  // The authenticated one is the oldest, but the unauthenticated go first, oldest first.
  Conn c1 = open(*table, "192.0.2.4");
  EXPECT_TRUE(c1.slot);
  EXPECT_TRUE(*older.evicted);
  EXPECT_FALSE(*newer.evicted);
  EXPECT_FALSE(*authed.evicted);
  EXPECT_EQ(table->size(), 3u);
  later();
  Conn c2 = open(*table, "192.0.2.5");
  EXPECT_TRUE(*newer.evicted);
  // Only authenticated or newer idle ones are left: c1 (unauthenticated, idle since accept) goes.
  Conn c3 = open(*table, "192.0.2.6");
  EXPECT_TRUE(*c1.evicted);
  EXPECT_FALSE(*authed.evicted);
  // An evicted slot's destruction gives nothing back twice.
  older = Conn{};
  newer = Conn{};
  c1 = Conn{};
  EXPECT_EQ(table->size(), 3u);
}

// A connection idle for under a second may have its head (or its next request) on the way:
// one that has waited longer goes first, even one that presented the key.
TEST(ConnectionTable, AConnectionJustAcceptedOrAnsweredGoesOnlyWhenNoSettledOneIsIdle) {
  auto table = ConnectionTable::create({.total = 2, .per_address = 2});
  Conn settled = open(*table, "192.0.2.1");
  settled.slot.authenticated();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  Conn fresh = open(*table, "192.0.2.2");  // its head has yet to come
  Conn c = open(*table, "192.0.2.3");
  EXPECT_TRUE(c.slot);
  EXPECT_TRUE(*settled.evicted);
  EXPECT_FALSE(*fresh.evicted);
  c.slot.busy();
  Conn d = open(*table, "192.0.2.4");  // only the unsettled one is idle now: it goes
  EXPECT_TRUE(d.slot);
  EXPECT_TRUE(*fresh.evicted);
}

TEST(ConnectionTable, BusyConnectionsAreNeverClosedForRoom) {
  auto table = ConnectionTable::create({.total = 2, .per_address = 2});
  Conn a = open(*table, "192.0.2.1");
  Conn b = open(*table, "192.0.2.2");
  a.slot.busy();
  b.slot.busy();
  ConnectionTable::Refusal why{};
  Conn c = open(*table, "192.0.2.3", &why);
  EXPECT_FALSE(c.slot);
  EXPECT_EQ(why, ConnectionTable::Refusal::total);
  EXPECT_FALSE(*a.evicted || *b.evicted);
  b.slot.idle();  // its response is done: it waits for the next request
  Conn d = open(*table, "192.0.2.3", &why);
  EXPECT_TRUE(d.slot);
  EXPECT_TRUE(*b.evicted);
  EXPECT_FALSE(*a.evicted);
}

TEST(ConnectionTable, AnAddressAtItsLimitMakesRoomFromItsOwnConnectionsOnly) {
  auto table = ConnectionTable::create({.total = 10, .per_address = 2});
  Conn other = open(*table, "198.51.100.1");  // idle and older than all: not the address's to close
  later();
  Conn a1 = open(*table, "192.0.2.1");
  later();
  Conn a2 = open(*table, "192.0.2.1");
  Conn a3 = open(*table, "192.0.2.1");
  EXPECT_TRUE(a3.slot);
  EXPECT_TRUE(*a1.evicted);
  EXPECT_FALSE(*a2.evicted);
  EXPECT_FALSE(*other.evicted);
  EXPECT_EQ(table->size_of(make_address("192.0.2.1")), 2u);
  a2.slot.busy();
  a3.slot.busy();
  ConnectionTable::Refusal why{};
  Conn a4 = open(*table, "192.0.2.1", &why);
  EXPECT_FALSE(a4.slot);
  EXPECT_EQ(why, ConnectionTable::Refusal::per_address);
  EXPECT_TRUE(open(*table, "192.0.2.2").slot) << "another address is not held back";
}

TEST(ConnectionTable, AddressesAreCountedByIPv4AddressAndIPv6Slash64) {
  EXPECT_EQ(ConnectionTable::address_key(make_address("192.0.2.1")), "192.0.2.1");
  EXPECT_EQ(ConnectionTable::address_key(make_address("::ffff:192.0.2.1")), "192.0.2.1");
  EXPECT_EQ(ConnectionTable::address_key(make_address("2001:db8:1:2:aaaa:bbbb:cccc:dddd")), "2001:db8:1:2::/64");
  EXPECT_EQ(ConnectionTable::address_key(make_address("2001:db8:1:2::1")), "2001:db8:1:2::/64");
  EXPECT_NE(ConnectionTable::address_key(make_address("2001:db8:1:3::1")), "2001:db8:1:2::/64");

  auto table = ConnectionTable::create({.total = 10, .per_address = 1});
  Conn a = open(*table, "2001:db8:1:2::1");
  a.slot.busy();
  ConnectionTable::Refusal why{};
  EXPECT_FALSE(open(*table, "2001:db8:1:2::ffff", &why).slot) << "same /64";
  EXPECT_EQ(why, ConnectionTable::Refusal::per_address);
  EXPECT_TRUE(open(*table, "2001:db8:1:3::1").slot);
  Conn v4 = open(*table, "192.0.2.9");
  v4.slot.busy();
  EXPECT_FALSE(open(*table, "::ffff:192.0.2.9").slot) << "an IPv4 address seen through an IPv6 socket";
}

TEST(ConnectionTable, SlotsMoveAndOutliveTheirTable) {
  ConnectionSlot kept;
  {
    auto table = ConnectionTable::create({.total = 1, .per_address = 1});
    ConnectionSlot s = table->admit(make_address("192.0.2.1")).slot;
    kept = std::move(s);
    EXPECT_FALSE(s);  // NOLINT(bugprone-use-after-move): moved-from holds nothing
    EXPECT_EQ(table->size(), 1u);
  }
  kept.idle();
  kept = ConnectionSlot{};  // the table went with its last slot
}

TEST(ConnectionTable, ManyThreadsOpeningAndClosingLeaveItEmpty) {
  auto table = ConnectionTable::create({.total = 64, .per_address = 16});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&table, t] {
      const std::string address = "192.0.2." + std::to_string(t + 1);
      std::vector<ConnectionSlot> held;
      for (int i = 0; i < 2000; ++i) {
        auto admission = table->admit(make_address(address));
        if (admission.slot) {
          if (i % 3 == 0) admission.slot.busy();
          held.push_back(std::move(admission.slot));
        }
        if (held.size() > 20) held.erase(held.begin(), held.begin() + 10);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(table->size(), 0u);
}

}  // namespace
}  // namespace agentbox::http
