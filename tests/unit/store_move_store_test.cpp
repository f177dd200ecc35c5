// Moves between cluster nodes as the store keeps them: the two tables' states, the tombstone a
// move back supersedes, and the account's records read on one node and committed on another
// (through move.json) in one transaction.
#include "store/move_store.hpp"

#include <gtest/gtest.h>

#include "moves/records.hpp"
#include "store/chat_sessions.hpp"
#include "store/schema.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

class MoveStoreTest : public ::testing::Test {
 protected:
  testing::ScratchDir source_dir_{"agentbox-move-source"}, target_dir_{"agentbox-move-target"};
  MoveStore source_{open_state_db(source_dir_.path())}, target_{open_state_db(target_dir_.path())};
};

TEST_F(MoveStoreTest, AMoveOutIsOpenUntilMovedAndTheMovedOneIsATombstone) {
  EXPECT_FALSE(source_.open_out("alice"));
  source_.insert_out({"0123", "alice", "alice-1a2b3c", "n3", "127.0.0.1:8103", "moving", 100});
  ASSERT_TRUE(source_.open_out("alice"));
  EXPECT_EQ(source_.open_out("alice")->to_node, "n3");
  source_.set_out_state("0123", "sent", 101);
  EXPECT_EQ(source_.open_out("alice")->state, "sent");
  source_.set_out_state("0123", "done", 102);
  EXPECT_EQ(source_.open_out("alice")->state, "done") << "refused with a 503 until the target serves alice";
  source_.set_out_state("0123", "moved", 103);
  EXPECT_FALSE(source_.open_out("alice"));
  ASSERT_EQ(source_.outs().size(), 1u);
  EXPECT_EQ(source_.outs()[0].state, "moved");
  // The user moves back here: receiving supersedes the tombstone.
  source_.insert_in({"4567", "alice", "", "n3", "receiving", 200});
  EXPECT_TRUE(source_.outs().empty());
  ASSERT_EQ(source_.pending_ins().size(), 1u);
}

TEST_F(MoveStoreTest, RecordsTravelThroughMoveJsonAndCommitWithTheMove) {
  Db db = open_state_db(source_dir_.path());
  ProcessStore processes(open_state_db(source_dir_.path()));
  processes.insert({"p1", "alice-1a2b3c", "make", ProcessStatus::done, 0, 10, 12,
                    "/s/volumes/alice-1a2b3c/daemon/logs/p1.log", "chat-7"});
  processes.insert(
      {"p2", "alice-1a2b3c", "sleep 9", ProcessStatus::running, std::nullopt, 11, std::nullopt, "/x/p2.log"});
  processes.insert({"p3", "bob-000000", "ls", ProcessStatus::done, 0, 10, 12, "/x/p3.log"});
  ChatSessions(open_state_db(source_dir_.path())).remember("alice-1a2b3c", "chat-1", "sess-1", 50);
  db.exec("INSERT INTO token_usage VALUES ('alice-1a2b3c', '2026-12-01', 3, 10, 20, 30, 40)");

  const MovedRecords read = source_.records_of("alice-1a2b3c");
  ASSERT_EQ(read.processes.size(), 2u);  // bob's stays out
  EXPECT_EQ(read.processes[1].status, ProcessStatus::lost) << "its box stopped before the move read it";
  ASSERT_EQ(read.chats.size(), 1u);
  ASSERT_EQ(read.tokens.size(), 1u);
  EXPECT_EQ(read.tokens[0].tokens.cache_read_input_tokens, 40u);

  const MovedRecords carried = moves::records_from_json(nlohmann::json::parse(moves::records_json(read).dump()));
  target_.insert_in({"4567", "alice", "", "n1", "receiving", 200});
  target_.commit_in("4567", "alice-9f9f9f", carried);
  EXPECT_EQ(target_.in("4567")->state, "committed");
  EXPECT_EQ(target_.in("4567")->name, "alice-9f9f9f");
  ProcessStore on_target(open_state_db(target_dir_.path()));
  auto listed = on_target.list_by_account("alice-9f9f9f");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].command, "make");
  EXPECT_EQ(listed[0].exit_code, 0);
  EXPECT_EQ(listed[0].chat, "chat-7");  // the chat it ran for travels with it
  EXPECT_EQ(listed[1].status, ProcessStatus::lost);
  EXPECT_EQ(ChatSessions(open_state_db(target_dir_.path())).find("alice-9f9f9f", "chat-1"), "sess-1");
  TokenLedger ledger(open_state_db(target_dir_.path()));
  EXPECT_EQ(ledger.on("alice-9f9f9f", "2026-12-01").requests, 3u);
  // Committed once: a second commit of the same move is refused, nothing doubled.
  EXPECT_THROW(target_.commit_in("4567", "alice-9f9f9f", carried), Error);
  EXPECT_EQ(on_target.list_by_account("alice-9f9f9f").size(), 2u);
}

TEST_F(MoveStoreTest, ABrokenMoveJsonIsAnErrorNamingIt) {
  try {
    moves::records_from_json(nlohmann::json{{"processes", nlohmann::json::array()}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("move.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace agentbox
