// Chat -> Claude session: found again by the same account only, replaced by a newer session,
// forgotten on request, and still there after the store is reopened (a daemon restart).
#include "store/chat_sessions.hpp"

#include <gtest/gtest.h>

#include "store/schema.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

class ChatSessionsTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"agentbox-chat-sessions"};
};

TEST_F(ChatSessionsTest, RemembersPerAccountAndChatAcrossReopening) {
  {
    ChatSessions chats(open_state_db(scratch_.path()));
    EXPECT_EQ(chats.find("alice", "chat-1"), std::nullopt);
    chats.remember("alice", "chat-1", "session-a", 100);
    chats.remember("bob", "chat-1", "session-b", 100);
    chats.remember("alice", "chat-1", "session-a2", 200);  // a fresh session replaced it
  }
  ChatSessions chats(open_state_db(scratch_.path()));
  EXPECT_EQ(chats.find("alice", "chat-1"), "session-a2");
  EXPECT_EQ(chats.find("bob", "chat-1"), "session-b");
  EXPECT_EQ(chats.find("alice", "chat-2"), std::nullopt);
  EXPECT_EQ(chats.find("carol", "chat-1"), std::nullopt);
  chats.forget("alice", "chat-1");
  EXPECT_EQ(chats.find("alice", "chat-1"), std::nullopt);
  EXPECT_EQ(chats.find("bob", "chat-1"), "session-b");
}

}  // namespace
}  // namespace agentbox
