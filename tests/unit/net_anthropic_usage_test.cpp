// Token counts read from Messages API answers as they stream through the gateway.
#include "net/anthropic_usage.hpp"

#include <gtest/gtest.h>

#include <string>

namespace agentbox::net {
namespace {

// A streamed answer as the Messages API sends it (abridged to what matters and a little noise).
const std::string kStream =
    "event: message_start\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
    "\"content\":[],\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":7,\"cache_read_input_tokens\":3,"
    "\"output_tokens\":1}}}\n\n"
    "event: ping\ndata: {\"type\":\"ping\"}\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n"
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

TokenCounts expected_stream_counts() {
  TokenCounts c;
  c.input_tokens = 25;
  c.cache_creation_input_tokens = 7;
  c.cache_read_input_tokens = 3;
  c.output_tokens = 15;  // the last report: counts are cumulative within an answer
  return c;
}

TEST(UsageMeter, ReadsAStreamInOnePiece) {
  UsageMeter meter("text/event-stream; charset=utf-8");
  meter.feed(kStream);
  EXPECT_EQ(meter.finish(), expected_stream_counts());
  EXPECT_EQ(expected_stream_counts().total(), 50u);
}

TEST(UsageMeter, ReadsAStreamInAnyChunking) {
  for (size_t step : {1u, 2u, 7u, 64u}) {
    UsageMeter meter("text/event-stream");
    for (size_t i = 0; i < kStream.size(); i += step) meter.feed(std::string_view(kStream).substr(i, step));
    EXPECT_EQ(meter.finish(), expected_stream_counts()) << "chunks of " << step;
  }
}

TEST(UsageMeter, ReadsCrLfLinesAndALastLineWithoutNewline) {
  UsageMeter meter("text/event-stream");
  meter.feed(
      "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":4,\"output_tokens\":1}}}\r\n\r\n");
  meter.feed("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}");
  TokenCounts c = meter.finish();
  EXPECT_EQ(c.input_tokens, 4u);
  EXPECT_EQ(c.output_tokens, 9u);
}

TEST(UsageMeter, ReadsAJsonAnswer) {
  UsageMeter meter("application/json");
  std::string body = R"({"id":"msg_2","type":"message","content":[{"type":"text","text":"hi"}],)"
                     R"("usage":{"input_tokens":12,"output_tokens":34,"cache_read_input_tokens":5}})";
  meter.feed(body.substr(0, 10));
  meter.feed(body.substr(10));
  TokenCounts c = meter.finish();
  EXPECT_EQ(c.input_tokens, 12u);
  EXPECT_EQ(c.output_tokens, 34u);
  EXPECT_EQ(c.cache_read_input_tokens, 5u);
  EXPECT_EQ(c.cache_creation_input_tokens, 0u);
}

TEST(UsageMeter, IgnoresWhatItDoesNotUnderstand) {
  UsageMeter meter("text/event-stream");
  meter.feed("data: not json\n");
  meter.feed("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\"many\"}}\n");  // not a count
  meter.feed("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-3}}\n");
  meter.feed("data: {\"type\":\"future_event\",\"usage\":{\"output_tokens\":1000}}\n");  // not a usage report
  meter.feed(": a comment\nid: 7\nretry: 10\n");
  meter.feed("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2,\"new_kind_of_tokens\":5}}\n");
  TokenCounts c = meter.finish();
  EXPECT_EQ(c.output_tokens, 2u);
  EXPECT_EQ(c.total(), 2u);
}

TEST(UsageMeter, SkipsAnOversizedLineAndReadsTheNext) {
  UsageMeter meter("text/event-stream");
  std::string huge = "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":777},\"pad\":\"" +
                     std::string(UsageMeter::kLineLimit + 10, 'x') + "\"}\n";
  for (size_t i = 0; i < huge.size(); i += 4096) meter.feed(std::string_view(huge).substr(i, 4096));
  meter.feed("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":8}}\n");
  EXPECT_EQ(meter.finish().output_tokens, 8u);
}

TEST(UsageMeter, OtherContentTypesCountNothing) {
  for (const char* type : {"text/plain", "", "application/jsonx", "text/event-streams"}) {
    UsageMeter meter(type);
    meter.feed(R"({"usage":{"input_tokens":5}})");
    meter.feed("\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2}}\n");
    EXPECT_EQ(meter.finish().total(), 0u) << type;
  }
}

TEST(UsageMeter, AJsonBodyBeyondTheLimitIsNotHeld) {
  UsageMeter meter("application/json");
  std::string chunk(1 << 20, ' ');
  for (size_t sent = 0; sent <= UsageMeter::kJsonLimit; sent += chunk.size()) meter.feed(chunk);
  meter.feed(R"({"usage":{"input_tokens":5}})");
  EXPECT_EQ(meter.finish().total(), 0u);
}

}  // namespace
}  // namespace agentbox::net
