// SSE framing of the agent's streams: OpenAI `data:` frames and the native /agent/runs events.
#include "agent/sse_frames.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "agent/native_events.hpp"
#include "support/agent_fixtures.hpp"

namespace agentbox::agent {
namespace {

using nlohmann::json;

TEST(SseFrames, FramesDataAndTheOpenAiEnd) {
  EXPECT_EQ(sse::data("hello"), "data: hello\n\n");
  EXPECT_EQ(sse::json_data(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse::done(), "data: [DONE]\n\n");
  EXPECT_EQ(sse::event("exit", "{}"), "event: exit\ndata: {}\n\n");
  EXPECT_EQ(sse::json_event("artifact", json{{"path", "a.csv"}}), "event: artifact\ndata: {\"path\":\"a.csv\"}\n\n");
  EXPECT_EQ(sse::comment("keep-alive"), ": keep-alive\n\n");
}

TEST(SseFrames, SplitsLineBreaksSoAPayloadCannotEndAFrameOrAddAField) {
  // Without the split, "\n\nevent: x" in a payload would end the frame and start a forged one.
  EXPECT_EQ(sse::data("a\n\nevent: forged\r\nb\rc"), "data: a\ndata: \ndata: event: forged\ndata: b\ndata: c\n\n");
  EXPECT_EQ(sse::data("ends with newline\n"), "data: ends with newline\ndata: \n\n");
  // JSON never carries a raw line break: strings escape theirs.
  EXPECT_EQ(sse::json_data(json("two\nlines")), "data: \"two\\nlines\"\n\n");
}

TEST(SseFrames, ReplacesInvalidUtf8InJsonInsteadOfThrowing) {
  std::string frame = sse::json_data(json{{"t", std::string("ok\xff")}});
  EXPECT_EQ(frame, "data: {\"t\":\"ok\xef\xbf\xbd\"}\n\n");
}

TEST(NativeEvents, PassesTheCliLineThroughByteForByte) {
  std::string bytes = agentbox::testing::agent_fixture("bash.jsonl");
  auto events = agentbox::testing::parse_all(bytes);
  std::string stream;
  for (const auto& e : events) stream += native::line_event(agentbox::testing::view(e));
  // Each line of the recording, in order, as `event: claude` with the line as its data.
  std::string expected;
  for (size_t start = 0; start < bytes.size();) {
    size_t nl = bytes.find('\n', start);
    expected += "event: claude\ndata: " + bytes.substr(start, nl - start) + "\n\n";
    start = nl + 1;
  }
  EXPECT_EQ(stream, expected);
}

TEST(NativeEvents, SendsANonJsonLineAsADiagnostic) {
  auto events = agentbox::testing::parse_all("oops: \"not\" json\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(native::line_event(agentbox::testing::view(events[0])),
            "event: diagnostic\ndata: {\"text\":\"oops: \\\"not\\\" json\"}\n\n");
}

TEST(NativeEvents, DescribesTheExit) {
  EXPECT_EQ(native::exit_event(RunEnd{0, {}, false, ""}),
            "event: exit\ndata: {\"exit_code\":0,\"interrupted\":false,\"signal\":null}\n\n");
  EXPECT_EQ(
      native::exit_event(RunEnd{{}, SIGKILL, true, "x"}, json{{"session_id", "s1"}, {"exit_code", "forged"}}),
      "event: exit\ndata: {\"exit_code\":null,\"interrupted\":true,\"session_id\":\"s1\",\"signal\":\"SIGKILL\"}\n\n");
  EXPECT_EQ(native::artifact_event(json{{"path", "report.csv"}, {"size", 8}}),
            "event: artifact\ndata: {\"path\":\"report.csv\",\"size\":8}\n\n");
}

TEST(RunEnd, DescribesHowTheRunEnded) {
  EXPECT_EQ(describe(RunEnd{3, {}, false, ""}), "exit code 3");
  EXPECT_EQ(describe(RunEnd{{}, SIGTERM, false, ""}), "signal SIGTERM");
  EXPECT_EQ(describe(RunEnd{{}, SIGTERM, true, ""}), "interrupted");
  EXPECT_EQ(describe(RunEnd{}), "unknown");
}

}  // namespace
}  // namespace agentbox::agent
