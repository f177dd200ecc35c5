// Tokens per account and UTC day: counted in memory, stored by a writer thread, read back
// after a restart.
#include "store/token_usage.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace agentbox
