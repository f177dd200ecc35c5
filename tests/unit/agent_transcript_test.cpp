// A Claude Code transcript (~/.claude/projects/*/ID.jsonl) read back as the conversation: lines
// shaped as CLI 2.1.197 writes them, bookkeeping and sidechains left out, a torn line skipped.
#include "agent/transcript.hpp"

#include <gtest/gtest.h>

namespace agentbox::agent {
namespace {

constexpr const char* kTranscript =
    R"({"type":"queue-operation","operation":"enqueue","timestamp":"2026-12-01T22:20:46.488Z","sessionId":"4237d65a-695c-4e11-9855-f6e1c3376809","content":"make it"}
{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"make the report"},"uuid":"u1","timestamp":"2026-12-01T22:20:46.600Z","cwd":"/home/alice/chats/c1","sessionId":"4237d65a-695c-4e11-9855-f6e1c3376809","version":"2.1.197"}
{"parentUuid":"u1","isSidechain":false,"attachment":{"type":"skill_listing","content":"- a skill"},"type":"attachment","uuid":"a1"}
{"parentUuid":"a1","isSidechain":false,"message":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"echo hi"}}],"stop_reason":"tool_use"},"type":"assistant","uuid":"m1","timestamp":"2026-12-01T22:20:47.000Z","newKey":{"x":1}}
{"parentUuid":"m1","isSidechain":true,"message":{"role":"user","content":"a subagent's prompt"},"type":"user","uuid":"s1"}
{"parentUuid":"m1","isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"hi","is_error":false}]},"uuid":"u2","timestamp":"2026-12-01T22:20:47.339Z"}
{"parentUuid":"u2","isSidechain":false,"message":{"role":"assistant","content":[{"type":"text","text":"done: hi"}]},"type":"assistant","uuid":"m2","timestamp":"2026-12-01T22:20:47.500Z"}
{"type":"last-prompt","lastPrompt":"make the report","sessionId":"4237d65a-695c-4e11-9855-f6e1c3376809"}
{"parentUuid":"m2","type":"user","message":{"role":"us)";

TEST(Transcript, IsTheConversationWithoutBookkeeping) {
  Transcript t = parse_transcript(kTranscript);
  EXPECT_EQ(t.session_id, "4237d65a-695c-4e11-9855-f6e1c3376809");
  EXPECT_EQ(t.cwd, "/home/alice/chats/c1");
  EXPECT_EQ(t.first_prompt, "make the report");
  ASSERT_EQ(t.messages.size(), 4u);
  EXPECT_EQ(t.messages[0].role, "user");
  EXPECT_EQ(t.messages[0].content, "make the report");
  EXPECT_EQ(t.messages[1].role, "assistant");
  EXPECT_EQ(t.messages[1].content[0]["name"], "Bash");
  EXPECT_EQ(t.messages[2].content[0]["type"], "tool_result");
  EXPECT_EQ(t.messages[3].content[0]["text"], "done: hi");
  EXPECT_EQ(t.messages[3].timestamp, "2026-12-01T22:20:47.500Z");
  EXPECT_EQ(t.skipped_lines, 1u);  // the torn last line
}

TEST(Transcript, EmptyOrForeignInputIsAnEmptyConversation) {
  EXPECT_TRUE(parse_transcript("").messages.empty());
  Transcript t = parse_transcript("not json\n[1,2]\n{\"type\":\"user\"}\n");
  EXPECT_TRUE(t.messages.empty());
  EXPECT_EQ(t.skipped_lines, 2u);
}

TEST(SessionId, OnlyAUuidNamesATranscript) {
  EXPECT_TRUE(is_session_id("4237d65a-695c-4e11-9855-f6e1c3376809"));
  EXPECT_FALSE(is_session_id("../../../etc/passwd-aaaaaaaaaaaaaaaaaaaaa"));
  EXPECT_FALSE(is_session_id("4237d65a-695c-4e11-9855-f6e1c337680"));
  EXPECT_FALSE(is_session_id("4237d65a/695c-4e11-9855-f6e1c3376809"));
  EXPECT_FALSE(is_session_id(""));
}

}  // namespace
}  // namespace agentbox::agent
