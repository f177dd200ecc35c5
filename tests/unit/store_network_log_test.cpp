// The egress decision log: stored through its queue, scoped to one account, newest first,
// paged, purged by age, and bounded in memory when the writer falls behind.
#include "store/network_log.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "store/schema.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

NetworkDecision decision(std::string account, std::string host, bool allowed, int64_t ts_ms = 1000) {
  NetworkDecision d;
  d.ts_ms = ts_ms;
  d.account = std::move(account);
  d.kind = "tunnel";
  d.host = std::move(host);
  d.port = 443;
  d.allowed = allowed;
  d.reason = allowed ? "allowed by \"*.example\"" : "agentbox: not in this sandbox's network allowlist";
  d.address = allowed ? "203.0.113.7" : "";
  d.bytes_up = allowed ? 120 : 0;
  d.bytes_down = allowed ? 4096 : 0;
  return d;
}

class NetworkLogTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"agentbox-network-log"};
};

TEST_F(NetworkLogTest, RecordsAreStoredAndReadBackPerAccountNewestFirst) {
  NetworkLog log(open_state_db(scratch_.path()));
  log.record(decision("alice", "a.example", true, 1000));
  log.record(decision("bob", "b.example", false, 1001));
  log.record(decision("alice", "c.example", false, 1002));
  log.flush();
  std::vector<NetworkDecision> alice = log.list("alice", 10);
  ASSERT_EQ(alice.size(), 2u);
  EXPECT_EQ(alice[0].host, "c.example");
  EXPECT_FALSE(alice[0].allowed);
  EXPECT_EQ(alice[1].host, "a.example");
  EXPECT_TRUE(alice[1].allowed);
  EXPECT_EQ(alice[1].address, "203.0.113.7");
  EXPECT_EQ(alice[1].bytes_down, 4096);
  EXPECT_EQ(alice[1].ts_ms, 1000);
  ASSERT_EQ(log.list("bob", 10).size(), 1u);
  EXPECT_TRUE(log.list("carol", 10).empty());
}

// The writer gathers decisions for a moment before it stores them: one that comes alone is
// still stored without anyone asking (GET /network/log reads without a flush).
TEST_F(NetworkLogTest, ADecisionThatComesAloneIsStoredWithoutAFlush) {
  NetworkLog log(open_state_db(scratch_.path()));
  log.record(decision("alice", "alone.example", true));
  std::vector<NetworkDecision> seen;
  for (int i = 0; i < 500 && seen.empty(); ++i) {  // up to 5 s
    seen = log.list("alice", 10);
    if (seen.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].host, "alone.example");
}

// GET /network/log lists through after_stored: what was recorded before it asked is listed,
// and nothing waits when everything is stored already.
TEST_F(NetworkLogTest, AfterStoredSeesEverythingRecordedBeforeIt) {
  NetworkLog log(open_state_db(scratch_.path()));
  std::promise<size_t> none_queued;
  log.after_stored([&] { none_queued.set_value(log.list("alice", 10).size()); });
  EXPECT_EQ(none_queued.get_future().get(), 0u);
  for (int round = 1; round <= 20; ++round) {
    log.record(decision("alice", "h" + std::to_string(round) + ".example", false));
    std::promise<size_t> listed;
    log.after_stored([&] { listed.set_value(log.list("alice", 100).size()); });
    ASSERT_EQ(listed.get_future().get(), static_cast<size_t>(round));
  }
}

// A burst larger than one batch (kBatch, 512) while the writer is gathering: every decision
// is stored, in order.
TEST_F(NetworkLogTest, ABurstOfManyBatchesIsStoredWhole) {
  NetworkLog log(open_state_db(scratch_.path()));
  constexpr int kBurst = 1300;
  for (int i = 0; i < kBurst; ++i) log.record(decision("alice", "h" + std::to_string(i) + ".example", true, 1000 + i));
  log.flush();
  std::vector<NetworkDecision> all = log.list("alice", 1000);
  std::vector<NetworkDecision> rest = log.list("alice", 1000, all.back().id);
  ASSERT_EQ(all.size() + rest.size(), static_cast<size_t>(kBurst));
  EXPECT_EQ(all.front().host, "h1299.example");
  EXPECT_EQ(rest.back().host, "h0.example");
  EXPECT_EQ(log.dropped(), 0u);
}

TEST_F(NetworkLogTest, PagesGoBackInTime) {
  NetworkLog log(open_state_db(scratch_.path()));
  for (int i = 0; i < 25; ++i) log.record(decision("alice", "h" + std::to_string(i) + ".example", true, 1000 + i));
  log.flush();
  std::vector<NetworkDecision> page1 = log.list("alice", 10);
  ASSERT_EQ(page1.size(), 10u);
  EXPECT_EQ(page1.front().host, "h24.example");
  std::vector<NetworkDecision> page2 = log.list("alice", 10, page1.back().id);
  ASSERT_EQ(page2.size(), 10u);
  EXPECT_EQ(page2.front().host, "h14.example");
  std::vector<NetworkDecision> page3 = log.list("alice", 10, page2.back().id);
  EXPECT_EQ(page3.size(), 5u);
}

TEST_F(NetworkLogTest, KeptAcrossARestartAndPurgedByAge) {
  {
    NetworkLog log(open_state_db(scratch_.path()));
    log.record(decision("alice", "old.example", true, 1000));
    log.record(decision("alice", "new.example", true, 5000));
  }  // the destructor stores what was queued
  NetworkLog log(open_state_db(scratch_.path()));
  EXPECT_EQ(log.list("alice", 10).size(), 2u);
  EXPECT_EQ(log.purge_before(2000), 1);
  std::vector<NetworkDecision> left = log.list("alice", 10);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].host, "new.example");
}

TEST_F(NetworkLogTest, DecisionsPastTheRetentionAreForgottenByTheWriter) {
  const int64_t now = now_unix_ms();
  const int64_t day = 24 * 3600 * 1000;
  {
    NetworkLog log(open_state_db(scratch_.path()));  // no retention: keeps everything
    log.record(decision("alice", "two-days-ago.example", true, now - 2 * day));
    log.record(decision("alice", "an-hour-ago.example", true, now - day / 24));
  }
  NetworkLog log(open_state_db(scratch_.path()), /*retention=*/std::chrono::hours(24));
  log.record(decision("alice", "now.example", true, now));
  log.flush();  // the writer purges at start, before it stores its first batch
  std::vector<NetworkDecision> left = log.list("alice", 10);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].host, "now.example");
  EXPECT_EQ(left[1].host, "an-hour-ago.example");
}

TEST_F(NetworkLogTest, AFullQueueDropsAndCountsInsteadOfGrowing) {
  NetworkLog log(open_state_db(scratch_.path()), /*retention=*/std::chrono::seconds(0), /*queue_limit=*/4);
  // Hold the database so the writer cannot drain while we record.
  Db blocker = Db::open(scratch_.path() + "/agentbox.db");
  blocker.exec("BEGIN IMMEDIATE");
  for (int i = 0; i < 50; ++i) log.record(decision("alice", "x.example", true));
  blocker.exec("COMMIT");
  log.flush();
  EXPECT_GT(log.dropped(), 0u);
  EXPECT_EQ(log.list("alice", 100).size() + log.dropped(), 50u);
}

// A refusal again and again (a box retrying in a loop) is one row with a count and a last time,
// in the queue and across the writer's batches; other refusals and allowed decisions keep rows
// of their own.
TEST_F(NetworkLogTest, TheSameRefusalRepeatedIsOneRowWithACountAndTheLastTime) {
  NetworkLog log(open_state_db(scratch_.path()));
  for (int i = 0; i < 1000; ++i) log.record(decision("alice", "evil.example", false, 10'000 + i));
  log.flush();
  for (int i = 1000; i < 2000; ++i) {  // across many batches
    log.record(decision("alice", "evil.example", false, 10'000 + i));
    if (i % 100 == 0) log.flush();
  }
  log.record(decision("alice", "other.example", false, 12'000));  // another host: its own row
  log.record(decision("alice", "a.example", true, 12'001));       // allowed: never merged
  log.record(decision("alice", "a.example", true, 12'002));
  log.record(decision("bob", "evil.example", false, 12'003));  // another account's
  log.flush();
  std::vector<NetworkDecision> alice = log.list("alice", 10);
  ASSERT_EQ(alice.size(), 4u);
  EXPECT_EQ(alice[0].host, "a.example");
  EXPECT_EQ(alice[0].count, 1);
  EXPECT_EQ(alice[1].host, "a.example");
  EXPECT_EQ(alice[2].host, "other.example");
  EXPECT_EQ(alice[2].count, 1);
  EXPECT_EQ(alice[2].last_ms, 12'000);
  EXPECT_EQ(alice[3].host, "evil.example");
  EXPECT_FALSE(alice[3].allowed);
  EXPECT_EQ(alice[3].count, 2000);
  EXPECT_EQ(alice[3].ts_ms, 10'000);
  EXPECT_EQ(alice[3].last_ms, 11'999);
  std::vector<NetworkDecision> bob = log.list("bob", 10);
  ASSERT_EQ(bob.size(), 1u);
  EXPECT_EQ(bob[0].count, 1);
  // Refused once more: its row is the newest again, with every refusal counted.
  log.record(decision("alice", "evil.example", false, 12'500));
  log.flush();
  alice = log.list("alice", 10);
  ASSERT_EQ(alice.size(), 4u);
  EXPECT_EQ(alice[0].host, "evil.example");
  EXPECT_EQ(alice[0].count, 2001);
  EXPECT_EQ(alice[0].last_ms, 12'500);
  EXPECT_EQ(alice[1].host, "a.example");
  EXPECT_EQ(alice[3].host, "other.example");
}

// A refusal merges into a row begun at most a minute before it: a box refused all day leaves a
// row a minute, and each row says when its refusals happened.
TEST_F(NetworkLogTest, ARefusalAMinuteAfterItsRowBeganStartsANewRow) {
  NetworkLog log(open_state_db(scratch_.path()));
  const int64_t window = NetworkLog::kMergeWindow.count();
  log.record(decision("alice", "evil.example", false, 1'000'000));
  log.record(decision("alice", "evil.example", false, 1'000'000 + window));  // within: merged
  log.flush();
  log.record(decision("alice", "evil.example", false, 1'000'000 + window + 1));  // past it
  log.record(decision("alice", "evil.example", false, 1'000'000 + window + 2));
  log.flush();
  std::vector<NetworkDecision> rows = log.list("alice", 10);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].count, 2);
  EXPECT_EQ(rows[0].ts_ms, 1'000'000 + window + 1);
  EXPECT_EQ(rows[1].count, 2);
  EXPECT_EQ(rows[1].last_ms, 1'000'000 + window);
}

// An account keeps its newest rows_per_account rows; other accounts keep theirs.
TEST_F(NetworkLogTest, AnAccountKeepsItsNewestRowsUpToItsCap) {
  NetworkLog log(open_state_db(scratch_.path()), std::chrono::seconds(0), NetworkLog::kDefaultQueueLimit,
                 /*rows_per_account=*/100);
  log.record(decision("bob", "b.example", true, 999));
  for (int i = 0; i < 1000; ++i) {
    log.record(decision("alice", "h" + std::to_string(i) + ".example", i % 2 == 0, 1000 + i));
    if (i % 250 == 0) log.flush();
  }
  log.flush();
  std::vector<NetworkDecision> alice = log.list("alice", 1000);
  ASSERT_EQ(alice.size(), 100u);
  EXPECT_EQ(alice.front().host, "h999.example");
  EXPECT_EQ(alice.back().host, "h900.example");
  EXPECT_EQ(log.list("bob", 10).size(), 1u);
  // The count is kept across a restart too (read again from the database).
  {
    NetworkLog again(open_state_db(scratch_.path()), std::chrono::seconds(0), NetworkLog::kDefaultQueueLimit, 100);
    again.record(decision("alice", "after-restart.example", true, 5000));
  }
  NetworkLog reader(open_state_db(scratch_.path()));
  alice = reader.list("alice", 1000);
  ASSERT_EQ(alice.size(), 100u);
  EXPECT_EQ(alice.front().host, "after-restart.example");
  EXPECT_EQ(alice.back().host, "h901.example");
}

// A flood of one refusal while the writer is held takes one queue slot: nothing else is dropped.
TEST_F(NetworkLogTest, AFloodOfOneRefusalDoesNotCrowdOthersOutOfTheQueue) {
  NetworkLog log(open_state_db(scratch_.path()), /*retention=*/std::chrono::seconds(0), /*queue_limit=*/4);
  Db blocker = Db::open(scratch_.path() + "/agentbox.db");
  blocker.exec("BEGIN IMMEDIATE");
  for (int i = 0; i < 10'000; ++i) log.record(decision("alice", "evil.example", false, 1000));
  log.record(decision("bob", "b.example", true));
  log.record(decision("alice", "a.example", true));
  blocker.exec("COMMIT");
  log.flush();
  EXPECT_EQ(log.dropped(), 0u);
  std::vector<NetworkDecision> alice = log.list("alice", 10);
  ASSERT_EQ(alice.size(), 2u);
  EXPECT_EQ(alice[1].count, 10'000);
  EXPECT_EQ(log.list("bob", 10).size(), 1u);
}

// Rows written before the count existed (schema 5) read as single decisions.
TEST_F(NetworkLogTest, RowsFromBeforeTheMergeReadAsOneDecisionEach) {
  {
    Db db = Db::open(scratch_.path() + "/agentbox.db");
    db.exec(R"sql(
CREATE TABLE network_log (
  id         INTEGER PRIMARY KEY,
  ts_ms      INTEGER NOT NULL,
  account    TEXT NOT NULL,
  kind       TEXT NOT NULL CHECK (kind IN ('tunnel', 'forward', 'gateway')),
  host       TEXT NOT NULL,
  port       INTEGER NOT NULL,
  address    TEXT NOT NULL,
  allowed    INTEGER NOT NULL CHECK (allowed IN (0, 1)),
  reason     TEXT NOT NULL,
  bytes_up   INTEGER NOT NULL,
  bytes_down INTEGER NOT NULL
) STRICT;
INSERT INTO network_log VALUES (1, 4242, 'alice', 'tunnel', 'old.example', 443, '', 0, 'refused', 0, 0);
-- Step 1's processes table, which every real schema 5 has and step 7 alters.
CREATE TABLE processes (id TEXT PRIMARY KEY) STRICT;
PRAGMA user_version = 5;
)sql");
  }
  NetworkLog log(open_state_db(scratch_.path()));  // migrates to the latest schema
  log.record(decision("alice", "old.example", false, 5000));
  log.flush();
  std::vector<NetworkDecision> rows = log.list("alice", 10);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].host, "old.example");
  EXPECT_EQ(rows[1].count, 1);
  EXPECT_EQ(rows[1].last_ms, 4242);
}

}  // namespace
}  // namespace agentbox
