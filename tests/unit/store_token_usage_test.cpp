// Tokens per account and UTC day: counted in memory, stored by a writer thread, read back
// after a restart.
#include "store/token_usage.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "store/schema.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

TokenCounts counts(uint64_t in, uint64_t out, uint64_t cache_write = 0, uint64_t cache_read = 0) {
  TokenCounts c;
  c.input_tokens = in;
  c.output_tokens = out;
  c.cache_creation_input_tokens = cache_write;
  c.cache_read_input_tokens = cache_read;
  return c;
}

TEST(UtcDay, IsTheDateInUtc) {
  EXPECT_EQ(utc_day(0), "1970-01-01");
  EXPECT_EQ(utc_day(1796083199), "2026-11-30");  // 23:59:59 UTC
  EXPECT_EQ(utc_day(1796083200), "2026-12-01");
}

class TokenLedgerTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"agentbox-token-usage"};
};

TEST_F(TokenLedgerTest, AddsUpPerAccountAndDay) {
  TokenLedger ledger(open_state_db(scratch_.path()));
  ledger.add("alice", "2026-12-01", counts(10, 5));
  ledger.add("alice", "2026-12-01", counts(1, 2, 3, 4));
  ledger.add("alice", "2026-11-30", counts(100, 0));
  ledger.add("bob", "2026-12-01", counts(7, 7));

  DailyTokens today = ledger.on("alice", "2026-12-01");
  EXPECT_EQ(today.requests, 2u);
  EXPECT_EQ(today.tokens, counts(11, 7, 3, 4));
  EXPECT_EQ(today.tokens.total(), 25u);
  EXPECT_EQ(ledger.on("bob", "2026-12-01").tokens.total(), 14u);
  EXPECT_EQ(ledger.on("carol", "2026-12-01").requests, 0u);
}

TEST_F(TokenLedgerTest, RecentDaysNewestFirstAndOnlyTheCallersOwn) {
  TokenLedger ledger(open_state_db(scratch_.path()));
  ledger.add("alice", "2026-11-29", counts(1, 0));
  ledger.add("alice", "2026-12-01", counts(3, 0));
  ledger.add("alice", "2026-11-30", counts(2, 0));
  ledger.add("bob", "2026-12-02", counts(9, 9));
  std::vector<DailyTokens> days = ledger.recent("alice", 2);
  ASSERT_EQ(days.size(), 2u);
  EXPECT_EQ(days[0].day, "2026-12-01");
  EXPECT_EQ(days[0].tokens.input_tokens, 3u);
  EXPECT_EQ(days[1].day, "2026-11-30");
}

TEST_F(TokenLedgerTest, TotalsSurviveARestart) {
  {
    TokenLedger ledger(open_state_db(scratch_.path()));
    ledger.add("alice", "2026-12-01", counts(10, 20));
  }  // the destructor stores what is pending
  TokenLedger again(open_state_db(scratch_.path()));
  EXPECT_EQ(again.on("alice", "2026-12-01").tokens, counts(10, 20));
  again.add("alice", "2026-12-01", counts(1, 1));
  again.flush();
  TokenLedger third(open_state_db(scratch_.path()));
  DailyTokens d = third.on("alice", "2026-12-01");
  EXPECT_EQ(d.requests, 2u);
  EXPECT_EQ(d.tokens, counts(11, 21));
}

TEST_F(TokenLedgerTest, ManyWritersLoseNothing) {
  TokenLedger ledger(open_state_db(scratch_.path()));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) ledger.add("alice", "2026-12-01", counts(1, 1));
    });
  for (auto& t : threads) t.join();
  ledger.flush();
  TokenLedger reread(open_state_db(scratch_.path()));
  EXPECT_EQ(reread.on("alice", "2026-12-01").requests, 2000u);
  EXPECT_EQ(reread.on("alice", "2026-12-01").tokens.total(), 4000u);
}

TEST_F(TokenLedgerTest, ReservationsInFlightCountAgainstTheBudget) {
  TokenLedger ledger(open_state_db(scratch_.path()));
  ledger.add("alice", "2026-12-01", counts(100, 0));
  uint64_t left = 0;
  std::optional<TokenReservation> a = ledger.reserve("alice", "2026-12-01", 600, 1000, left);
  ASSERT_TRUE(a);
  EXPECT_EQ(left, 900u);
  EXPECT_EQ(ledger.in_flight("alice", "2026-12-01"), 600u);
  // 100 used and 600 held: 300 left, so 301 does not fit and 300 does.
  EXPECT_FALSE(ledger.reserve("alice", "2026-12-01", 301, 1000, left));
  EXPECT_EQ(left, 300u);
  std::optional<TokenReservation> b = ledger.reserve("alice", "2026-12-01", 300, 1000, left);
  ASSERT_TRUE(b);
  EXPECT_FALSE(ledger.reserve("alice", "2026-12-01", 1, 1000, left));
  EXPECT_EQ(left, 0u);
  // Another account, another day: budgets of their own.
  EXPECT_TRUE(ledger.reserve("bob", "2026-12-01", 1000, 1000, left));
  EXPECT_TRUE(ledger.reserve("alice", "2026-12-02", 1000, 1000, left));

  // The answer's counts replace the reservation: 600 held, 50 used.
  a->settle(counts(40, 10));
  EXPECT_EQ(ledger.in_flight("alice", "2026-12-01"), 300u);
  DailyTokens d = ledger.on("alice", "2026-12-01");
  EXPECT_EQ(d.requests, 2u);
  EXPECT_EQ(d.tokens.total(), 150u);
  EXPECT_TRUE(ledger.reserve("alice", "2026-12-01", 550, 1000, left));
  EXPECT_EQ(left, 550u);
}

TEST_F(TokenLedgerTest, AReservationDroppedUnsettledIsReleasedAndCountsNothing) {
  TokenLedger ledger(open_state_db(scratch_.path()));
  uint64_t left = 0;
  {
    std::optional<TokenReservation> r = ledger.reserve("alice", "2026-12-01", 700, 1000, left);
    ASSERT_TRUE(r);
    TokenReservation moved = std::move(*r);  // one owner: released once
    r.reset();
    EXPECT_EQ(ledger.in_flight("alice", "2026-12-01"), 700u);
  }
  EXPECT_EQ(ledger.in_flight("alice", "2026-12-01"), 0u);
  EXPECT_EQ(ledger.on("alice", "2026-12-01").requests, 0u);
  EXPECT_TRUE(ledger.reserve("alice", "2026-12-01", 1000, 1000, left));
}

TEST_F(TokenLedgerTest, ParallelReservationsNeverHoldMoreThanTheBudget) {
  TokenLedger ledger(open_state_db(scratch_.path()));
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<TokenReservation> held;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        uint64_t left = 0;
        if (auto r = ledger.reserve("alice", "2026-12-01", 7, 1000, left)) {
          ++granted;
          std::lock_guard lock(mu);
          held.push_back(std::move(*r));
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 1000 / 7);
  EXPECT_EQ(ledger.in_flight("alice", "2026-12-01"), 7u * (1000 / 7));
  for (TokenReservation& r : held) r.settle(counts(1, 0));
  EXPECT_EQ(ledger.in_flight("alice", "2026-12-01"), 0u);
  EXPECT_EQ(ledger.on("alice", "2026-12-01").tokens.total(), uint64_t(1000 / 7));
}

}  // namespace
}  // namespace agentbox
