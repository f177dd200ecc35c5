// Process records: stored, updated, scoped to their account, and marked lost after a restart.
#include "store/process_store.hpp"

#include <gtest/gtest.h>

#include <set>

#include "store/schema.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

class ProcessStoreTest : public ::testing::Test {
 protected:
  static ProcessRecord record(std::string id, std::string account, int64_t started) {
    ProcessRecord r;
    r.id = std::move(id);
    r.account = std::move(account);
    r.command = "echo " + r.id;
    r.started = started;
    r.log_path = "logs/" + r.id + ".log";
    return r;
  }

  testing::ScratchDir scratch_{"agentbox-processes"};
  const std::string dir_ = scratch_.path();
};

TEST_F(ProcessStoreTest, InsertThenGetReturnsTheSameRecord) {
  ProcessStore procs(open_state_db(dir_));
  ProcessRecord r = record("p1", "alice-2bd806", 100);
  procs.insert(r);
  std::optional<ProcessRecord> got = procs.get("alice-2bd806", "p1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, "p1");
  EXPECT_EQ(got->account, "alice-2bd806");
  EXPECT_EQ(got->command, "echo p1");
  EXPECT_EQ(got->status, ProcessStatus::running);
  EXPECT_EQ(got->exit_code, std::nullopt);
  EXPECT_EQ(got->started, 100);
  EXPECT_EQ(got->ended, std::nullopt);
  EXPECT_EQ(got->log_path, "logs/p1.log");
}

TEST_F(ProcessStoreTest, TheChatARecordRanForIsKept) {
  ProcessStore procs(open_state_db(dir_));
  ProcessRecord r = record("p1", "alice-2bd806", 100);
  r.chat = "chat-1";
  procs.insert(r);
  procs.insert(record("p2", "alice-2bd806", 101));
  EXPECT_EQ(procs.get("alice-2bd806", "p1")->chat, "chat-1");
  EXPECT_EQ(procs.get("alice-2bd806", "p2")->chat, "");  // none named
  auto all = procs.list_by_account("alice-2bd806");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].chat, "chat-1");
}

TEST_F(ProcessStoreTest, AnotherAccountCannotSeeTheRecord) {
  ProcessStore procs(open_state_db(dir_));
  procs.insert(record("p1", "alice-2bd806", 100));
  EXPECT_FALSE(procs.get("bob-81b637", "p1"));
  EXPECT_TRUE(procs.list_by_account("bob-81b637").empty());
}

TEST_F(ProcessStoreTest, DuplicateIdIsRefused) {
  ProcessStore procs(open_state_db(dir_));
  procs.insert(record("p1", "alice-2bd806", 100));
  try {
    procs.insert(record("p1", "bob-81b637", 200));
    FAIL() << "no error";
  } catch (const DbError& e) {
    EXPECT_EQ(e.result_code(), SQLITE_CONSTRAINT_PRIMARYKEY);
  }
  EXPECT_EQ(procs.get("alice-2bd806", "p1")->started, 100);
}

TEST_F(ProcessStoreTest, UpdateRecordsTheEnd) {
  ProcessStore procs(open_state_db(dir_));
  procs.insert(record("p1", "alice-2bd806", 100));
  EXPECT_TRUE(procs.update("p1", ProcessStatus::done, 3, 150));
  ProcessRecord got = *procs.get("alice-2bd806", "p1");
  EXPECT_EQ(got.status, ProcessStatus::done);
  EXPECT_EQ(got.exit_code, 3);
  EXPECT_EQ(got.ended, 150);
  EXPECT_FALSE(procs.update("nope", ProcessStatus::killed, std::nullopt, 1));
}

TEST_F(ProcessStoreTest, ListIsPerAccountOldestFirst) {
  ProcessStore procs(open_state_db(dir_));
  procs.insert(record("b", "alice-2bd806", 200));
  procs.insert(record("a", "alice-2bd806", 100));
  procs.insert(record("x", "bob-81b637", 150));
  procs.insert(record("c", "alice-2bd806", 200));
  std::vector<ProcessRecord> list = procs.list_by_account("alice-2bd806");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].id, "a");
  EXPECT_EQ(list[1].id, "b");  // same start: insertion order
  EXPECT_EQ(list[2].id, "c");
}

TEST_F(ProcessStoreTest, RestartMarksOnlyRunningAsLost) {
  {
    ProcessStore before(open_state_db(dir_));
    before.insert(record("run1", "alice-2bd806", 100));
    before.insert(record("run2", "bob-81b637", 100));
    before.insert(record("fin", "alice-2bd806", 100));
    before.update("fin", ProcessStatus::done, 0, 120);
  }
  ProcessStore after(open_state_db(dir_));  // the daemon restarted
  EXPECT_EQ(after.mark_running_as_lost(500), 2);
  ProcessRecord lost = *after.get("alice-2bd806", "run1");
  EXPECT_EQ(lost.status, ProcessStatus::lost);
  EXPECT_EQ(lost.ended, 500);
  EXPECT_EQ(lost.exit_code, std::nullopt);
  ProcessRecord fin = *after.get("alice-2bd806", "fin");
  EXPECT_EQ(fin.status, ProcessStatus::done);
  EXPECT_EQ(fin.ended, 120);
  EXPECT_EQ(after.mark_running_as_lost(600), 0);
}

// [exec] keep_finished: an account's newest finished records stay, its boxes' (profiles',
// chats') counted together; running ones and other accounts' are never dropped.
TEST_F(ProcessStoreTest, PurgeBeyondKeepsEachAccountsNewestFinished) {
  ProcessStore procs(open_state_db(dir_));
  for (int i = 0; i < 4; ++i) {
    const std::string id = "a" + std::to_string(i);
    procs.insert(record(id, i % 2 ? "alice-2bd806~chat~0123456789abcdef" : "alice-2bd806", 100 + i));
    procs.update(id, ProcessStatus::done, 0, 200 + i);
  }
  procs.insert(record("running", "alice-2bd806", 50));
  procs.insert(record("b0", "bob-81b637", 10));
  procs.update("b0", ProcessStatus::done, 0, 11);
  std::vector<ProcessStore::Dropped> dropped = procs.purge_finished_beyond(2);
  ASSERT_EQ(dropped.size(), 2u);
  std::set<std::string> ids{dropped[0].id, dropped[1].id};
  EXPECT_EQ(ids, (std::set<std::string>{"a0", "a1"}));
  EXPECT_EQ(dropped[0].log_path, "logs/" + dropped[0].id + ".log");
  EXPECT_TRUE(procs.get("alice-2bd806", "a2"));
  EXPECT_TRUE(procs.get("alice-2bd806~chat~0123456789abcdef", "a3"));
  EXPECT_TRUE(procs.get("alice-2bd806", "running"));
  EXPECT_TRUE(procs.get("bob-81b637", "b0"));
  EXPECT_TRUE(procs.purge_finished_beyond(2).empty());
}

TEST_F(ProcessStoreTest, PurgeDropsOnlyFinishedRecordsPastRetention) {
  ProcessStore procs(open_state_db(dir_));
  procs.insert(record("old", "alice-2bd806", 10));
  procs.update("old", ProcessStatus::done, 0, 20);
  procs.insert(record("recent", "alice-2bd806", 10));
  procs.update("recent", ProcessStatus::killed, std::nullopt, 90);
  procs.insert(record("running", "alice-2bd806", 10));
  EXPECT_EQ(procs.purge_ended_before(50), 1);
  EXPECT_FALSE(procs.get("alice-2bd806", "old"));
  EXPECT_TRUE(procs.get("alice-2bd806", "recent"));
  EXPECT_TRUE(procs.get("alice-2bd806", "running"));
}

TEST_F(ProcessStoreTest, StatusNamesRoundTrip) {
  for (ProcessStatus s : {ProcessStatus::running, ProcessStatus::done, ProcessStatus::killed, ProcessStatus::lost})
    EXPECT_EQ(process_status_from_string(to_string(s)), s);
  EXPECT_EQ(to_string(ProcessStatus::killed), "killed");
  EXPECT_THROW(process_status_from_string("zombie"), Error);
}

}  // namespace
}  // namespace agentbox
