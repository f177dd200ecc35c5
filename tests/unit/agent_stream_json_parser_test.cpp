// The stream-json parser on Claude Code's recorded output (tests/agent_fixtures/) and on the
// lines a CLI can also print: unknown types and keys, broken lines, huge lines, cut endings.
#include "agent/stream_json_parser.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "support/agent_fixtures.hpp"

namespace agentbox::agent {
namespace {

using testing::agent_fixture;
using testing::OwnedEvent;
using testing::parse_all;

const char* const kFixtures[] = {"text.jsonl",   "bash.jsonl",     "bash_nopartial.jsonl", "thinking.jsonl",
                                 "denied.jsonl", "maxturns.jsonl", "error529.jsonl"};

template <class T>
std::vector<T> all_of(const std::vector<OwnedEvent>& events) {
  std::vector<T> out;
  for (const auto& e : events)
    if (const T* p = std::get_if<T>(&e.body)) out.push_back(*p);
  return out;
}

template <class T>
T only(const std::vector<OwnedEvent>& events) {
  auto found = all_of<T>(events);
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? T{} : found.front();
}

// Two parses saw the same lines as the same kinds of event.
void expect_same_events(const std::vector<OwnedEvent>& a, const std::vector<OwnedEvent>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].line, b[i].line) << what << ", event " << i;
    EXPECT_EQ(a[i].body.index(), b[i].body.index()) << what << ", event " << i;
  }
}

TEST(StreamJsonParser, EveryRecordedLineIsAJsonEvent) {
  for (const char* name : kFixtures) {
    std::string bytes = agent_fixture(name);
    auto events = parse_all(bytes);
    size_t lines = 0;
    for (char c : bytes) lines += c == '\n';
    EXPECT_EQ(events.size(), lines) << name;
    EXPECT_TRUE(all_of<Diagnostic>(events).empty()) << name;
    EXPECT_TRUE(std::holds_alternative<SystemInit>(events.front().body)) << name;
    EXPECT_TRUE(std::holds_alternative<RunResult>(events.back().body)) << name;
  }
}

TEST(StreamJsonParser, ReadsInitPartialsAssistantAndResultOfAPlainAnswer) {
  auto events = parse_all(agent_fixture("text.jsonl"));
  SystemInit init = only<SystemInit>(events);
  EXPECT_EQ(init.session_id, "0370a489-a6d4-4092-b349-7724e6d463ef");
  EXPECT_EQ(init.model, "claude-opus-4-8[1m]");
  EXPECT_EQ(init.cwd, "/tmp/cc/work-text");
  EXPECT_EQ(init.version, "2.1.197");
  EXPECT_NE(std::find(init.tools.begin(), init.tools.end(), "Bash"), init.tools.end());

  std::string streamed;
  std::string message_id;
  for (const StreamEvent& ev : all_of<StreamEvent>(events)) {
    if (ev.kind == StreamEvent::Kind::message_start) {
      message_id = ev.message_id;
      ASSERT_TRUE(ev.usage);
      EXPECT_EQ(ev.usage->input_tokens, 42u);
    }
    if (ev.kind == StreamEvent::Kind::content_block_delta && ev.delta == StreamEvent::Delta::text) streamed += ev.text;
  }
  EXPECT_EQ(streamed, "Hello from the fake upstream.\nSecond line & <tags>.");

  AssistantMessage msg = only<AssistantMessage>(events);
  EXPECT_EQ(msg.message_id, message_id);
  ASSERT_EQ(msg.blocks.size(), 1u);
  EXPECT_EQ(msg.blocks[0].type, ContentBlock::Type::text);
  EXPECT_EQ(msg.blocks[0].text, streamed);

  RunResult r = only<RunResult>(events);
  EXPECT_EQ(r.subtype, "success");
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.result, streamed);
  EXPECT_EQ(r.session_id, init.session_id);
  EXPECT_NEAR(r.total_cost_usd, 0.00068025, 1e-12);
  EXPECT_EQ(r.usage, (TokenUsage{42, 17, 7, 3}));
  EXPECT_EQ(r.num_turns, 1u);
  EXPECT_EQ(r.duration_ms, 868u);
  EXPECT_FALSE(r.api_error_status);
}

TEST(StreamJsonParser, ReadsAToolCallItsPartialInputAndItsResult) {
  auto events = parse_all(agent_fixture("bash.jsonl"));
  std::string partial_json;
  for (const StreamEvent& ev : all_of<StreamEvent>(events)) {
    if (ev.kind == StreamEvent::Kind::content_block_start && ev.block == StreamEvent::Block::tool_use) {
      EXPECT_EQ(ev.tool_id, "toolu_fake_bash_1");
      EXPECT_EQ(ev.tool_name, "Bash");
    }
    if (ev.delta == StreamEvent::Delta::input_json) partial_json += ev.text;
  }
  const nlohmann::json input = {{"command", "printf 'a,b\\n1,2\\n' > report.csv && cat report.csv"},
                                {"description", "Write \"report.csv\" <demo>"}};
  EXPECT_EQ(nlohmann::json::parse(partial_json), input);

  auto messages = all_of<AssistantMessage>(events);
  ASSERT_EQ(messages.size(), 3u);  // text, tool_use, text: one message per block
  ASSERT_EQ(messages[1].blocks.size(), 1u);
  const ContentBlock& call = messages[1].blocks[0];
  EXPECT_EQ(call.type, ContentBlock::Type::tool_use);
  EXPECT_EQ(call.tool_id, "toolu_fake_bash_1");
  EXPECT_EQ(call.tool_name, "Bash");
  EXPECT_EQ(call.input, input);

  UserMessage user = only<UserMessage>(events);
  ASSERT_EQ(user.tool_results.size(), 1u);
  EXPECT_EQ(user.tool_results[0].tool_use_id, "toolu_fake_bash_1");
  EXPECT_EQ(user.tool_results[0].content, "a,b\n1,2");
  EXPECT_FALSE(user.tool_results[0].is_error);

  RunResult r = only<RunResult>(events);
  EXPECT_EQ(r.num_turns, 2u);
  EXPECT_EQ(r.usage, (TokenUsage{84, 34, 14, 6}));
}

TEST(StreamJsonParser, ReadsARefusedToolCallAsAnErrorResult) {
  auto events = parse_all(agent_fixture("denied.jsonl"));
  UserMessage user = only<UserMessage>(events);
  ASSERT_EQ(user.tool_results.size(), 1u);
  EXPECT_TRUE(user.tool_results[0].is_error);
  EXPECT_EQ(
      user.tool_results[0].content.rfind("Output redirection to '/tmp/cc/work-denied/report.csv' was blocked.", 0), 0u);
  EXPECT_EQ(only<RunResult>(events).permission_denials, 1u);
}

TEST(StreamJsonParser, ReadsThinkingBlocks) {
  auto events = parse_all(agent_fixture("thinking.jsonl"));
  std::string thinking;
  for (const StreamEvent& ev : all_of<StreamEvent>(events))
    if (ev.delta == StreamEvent::Delta::thinking) thinking += ev.text;
  EXPECT_EQ(thinking, "Let me think about this carefully.");
  auto messages = all_of<AssistantMessage>(events);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].blocks.at(0).type, ContentBlock::Type::thinking);
  EXPECT_EQ(messages[0].blocks.at(0).text, thinking);
  EXPECT_EQ(messages[1].blocks.at(0).text, "The answer is 4.");
  // system/thinking_tokens is a subtype this code does not use: kept as "other", not an error.
  bool saw_other_system = false;
  for (const OtherEvent& o : all_of<OtherEvent>(events))
    saw_other_system |= o.type == "system" && o.subtype == "thinking_tokens";
  EXPECT_TRUE(saw_other_system);
}

TEST(StreamJsonParser, ReadsResultErrorSubtypes) {
  RunResult turns = only<RunResult>(parse_all(agent_fixture("maxturns.jsonl")));
  EXPECT_EQ(turns.subtype, "error_max_turns");
  EXPECT_TRUE(turns.is_error);
  EXPECT_EQ(turns.result, "");  // this subtype carries no text
  EXPECT_EQ(turns.terminal_reason, "max_turns");
  EXPECT_EQ(turns.num_turns, 2u);
  EXPECT_EQ(turns.errors, (std::vector<std::string>{"Reached maximum number of turns (1)"}));

  auto events = parse_all(agent_fixture("error529.jsonl"));
  ApiRetry retry = only<ApiRetry>(events);
  EXPECT_EQ(retry.attempt, 1u);
  EXPECT_EQ(retry.error_status, 529);
  EXPECT_EQ(retry.error, "overloaded");
  AssistantMessage synthetic = only<AssistantMessage>(events);
  EXPECT_EQ(synthetic.model, "<synthetic>");
  EXPECT_EQ(synthetic.error, "server_error");
  RunResult overloaded = only<RunResult>(events);
  EXPECT_EQ(overloaded.subtype, "success");  // sic: the CLI marks an API error by is_error
  EXPECT_TRUE(overloaded.is_error);
  EXPECT_EQ(overloaded.api_error_status, 529);
  EXPECT_EQ(overloaded.result.rfind("API Error: 529 Overloaded.", 0), 0u);
  EXPECT_EQ(overloaded.result, synthetic.blocks.at(0).text);

  // error_during_execution as older and newer CLIs write it: an errors array, strings or objects.
  RunResult during =
      only<RunResult>(parse_all(R"({"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,)"
                                R"("errors":["Tool crashed",{"message":"and then this"},7],"session_id":"s1"})"
                                "\n"));
  EXPECT_EQ(during.subtype, "error_during_execution");
  EXPECT_EQ(during.errors, (std::vector<std::string>{"Tool crashed", "and then this"}));
  EXPECT_EQ(during.session_id, "s1");
}

TEST(StreamJsonParser, GivesTheSameEventsForAnyChunking) {
  for (const char* name : kFixtures) {
    std::string bytes = agent_fixture(name);
    auto whole = parse_all(bytes);
    for (size_t step : {1u, 2u, 3u, 7u, 64u, 4096u})
      expect_same_events(whole, parse_all(bytes, step), std::string(name) + " in steps of " + std::to_string(step));
  }
  // Cut in two at every byte boundary (the smallest recording, to keep this quick).
  std::string bytes = agent_fixture("error529.jsonl");
  auto whole = parse_all(bytes);
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    StreamJsonParser parser;
    std::vector<OwnedEvent> events;
    auto keep = [&](const Event& e) { events.push_back(OwnedEvent{std::string(e.line), e.body}); };
    parser.feed(std::string_view(bytes).substr(0, cut), keep);
    parser.feed(std::string_view(bytes).substr(cut), keep);
    parser.finish(keep);
    expect_same_events(whole, events, "cut at " + std::to_string(cut));
    if (HasFailure()) return;
  }
}

TEST(StreamJsonParser, ReadsALineOfManyMebibytesFedByteByByte) {
  // A tool result of 6 MiB (a base64 image, a big file read): linear framing keeps this fast,
  // where re-scanning or re-copying the pending line on every byte would not finish.
  std::string big(6 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 1000) big[i] = '\n';  // escaped below: JSON "\n"
  nlohmann::json line = {
      {"type", "user"},
      {"message",
       {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", big}}}}}}};
  std::string bytes = line.dump() + "\n" + R"({"type":"result","subtype":"success"})" + "\n";
  ASSERT_GT(bytes.size(), size_t{6} << 20);

  auto start = std::chrono::steady_clock::now();
  auto events = parse_all(bytes, 1);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(events.size(), 2u);
  UserMessage user = std::get<UserMessage>(events[0].body);
  ASSERT_EQ(user.tool_results.size(), 1u);
  EXPECT_EQ(user.tool_results[0].content, big);
  EXPECT_TRUE(std::holds_alternative<RunResult>(events[1].body));
  EXPECT_LT(took, std::chrono::seconds(60));  // linear: ~1 s here (3 s under ASan); quadratic: hours
}

TEST(StreamJsonParser, SkipsALineOverTheLimitAndGoesOn) {
  StreamJsonParser::Limits limits;
  limits.max_line_bytes = 1024;
  std::string long_line =
      R"({"type":"assistant","message":{"content":[{"type":"text","text":")" + std::string(5000, 'a') + "\"}]}}";
  std::string bytes =
      long_line + "\n" + R"({"type":"result","subtype":"success"})" + "\n" + long_line;  // the last one unended
  for (size_t step : {0u, 1u, 100u}) {
    auto events = parse_all(bytes, step, limits);
    ASSERT_EQ(events.size(), 3u) << step;
    ASSERT_TRUE(std::holds_alternative<Diagnostic>(events[0].body));
    EXPECT_NE(std::get<Diagnostic>(events[0].body).text.find("skipped"), std::string::npos);
    EXPECT_TRUE(std::holds_alternative<RunResult>(events[1].body));
    EXPECT_TRUE(std::holds_alternative<Diagnostic>(events[2].body));
  }
  StreamJsonParser parser(limits);
  parser.feed(bytes, [](const Event&) {});
  parser.finish([](const Event&) {});
  EXPECT_EQ(parser.skipped_lines(), 2u);
}

TEST(StreamJsonParser, KeepsUnknownTypesAndIgnoresUnknownOrMistypedKeys) {
  std::string bytes =
      R"({"type":"future_event","subtype":"x","payload":{"a":1}})"
      "\n"
      R"({"type":"system","subtype":"status","status":"requesting"})"
      "\n"
      R"({"type":"system","subtype":"init","session_id":42,"model":null,"tools":["Bash",7,"Read"],"new_key":{}})"
      "\n"
      R"({"type":"assistant","message":{"id":"m","content":[{"type":"redacted_thinking","data":"zz"},)"
      R"({"type":"text","text":"hi","citations":[]},{"type":"tool_use","id":"t","name":"Bash"}]},"extra":true})"
      "\n"
      R"({"type":"stream_event","event":{"type":"content_block_delta","index":"zero","delta":{"type":"citations_delta"}}})"
      "\n"
      R"({"type":"result","subtype":"success","usage":"lots","num_turns":-3,"total_cost_usd":"free","is_error":"yes"})"
      "\n"
      R"({"no_type":true})"
      "\n";
  auto events = parse_all(bytes);
  ASSERT_EQ(events.size(), 7u);
  EXPECT_TRUE(all_of<Diagnostic>(events).empty());
  OtherEvent future = std::get<OtherEvent>(events[0].body);
  EXPECT_EQ(future.type, "future_event");
  EXPECT_EQ(future.subtype, "x");
  EXPECT_EQ(std::get<OtherEvent>(events[1].body).subtype, "status");

  SystemInit init = std::get<SystemInit>(events[2].body);
  EXPECT_EQ(init.session_id, "");
  EXPECT_EQ(init.model, "");
  EXPECT_EQ(init.tools, (std::vector<std::string>{"Bash", "Read"}));

  AssistantMessage msg = std::get<AssistantMessage>(events[3].body);
  ASSERT_EQ(msg.blocks.size(), 3u);
  EXPECT_EQ(msg.blocks[0].type, ContentBlock::Type::other);
  EXPECT_EQ(msg.blocks[1].text, "hi");
  EXPECT_EQ(msg.blocks[2].type, ContentBlock::Type::tool_use);
  EXPECT_EQ(msg.blocks[2].input, nlohmann::json::object());  // no input: an empty object

  StreamEvent delta = std::get<StreamEvent>(events[4].body);
  EXPECT_EQ(delta.kind, StreamEvent::Kind::content_block_delta);
  EXPECT_EQ(delta.delta, StreamEvent::Delta::other);
  EXPECT_EQ(delta.index, 0u);

  RunResult r = std::get<RunResult>(events[5].body);
  EXPECT_EQ(r.usage, TokenUsage{});
  EXPECT_EQ(r.num_turns, 0u);
  EXPECT_EQ(r.total_cost_usd, 0.0);
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(std::get<OtherEvent>(events[6].body).type, "");
}

TEST(StreamJsonParser, KeepsBrokenLinesAsBoundedDiagnostics) {
  StreamJsonParser::Limits limits;
  limits.diagnostic_lines = 3;
  limits.diagnostic_line_bytes = 10;
  StreamJsonParser parser(limits);
  std::vector<OwnedEvent> events;
  auto keep = [&](const Event& e) { events.push_back(OwnedEvent{std::string(e.line), e.body}); };
  parser.feed("Warning: something odd\n", keep);
  parser.feed(R"({"type":"assistant","message":)"
              "\n",
              keep);                                                        // a JSON object cut short
  parser.feed("[1,2]\n\"a string\"\n", keep);                               // JSON, but not objects
  parser.feed("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\n", keep);  // "éééééé": 12 bytes
  parser.feed(R"({"type":"result","subtype":"success"})"
              "\n",
              keep);
  parser.finish(keep);
  ASSERT_EQ(events.size(), 6u);
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(std::holds_alternative<Diagnostic>(events[i].body)) << i;
  EXPECT_EQ(events[0].line, "Warning: something odd");  // the whole line for the native stream
  EXPECT_EQ(std::get<Diagnostic>(events[0].body).text, "Warning: s");
  EXPECT_TRUE(std::holds_alternative<RunResult>(events[5].body));
  // The last three, each cut to 10 bytes without splitting a character.
  EXPECT_EQ(parser.diagnostics(),
            (std::deque<std::string>{"[1,2]", "\"a string\"", "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"}));
}

TEST(StreamJsonParser, ReadsALastLineWithoutNewlineOnlyAtFinish) {
  std::string bytes = agent_fixture("text.jsonl");
  ASSERT_EQ(bytes.back(), '\n');
  bytes.pop_back();
  StreamJsonParser parser;
  std::vector<OwnedEvent> events;
  auto keep = [&](const Event& e) { events.push_back(OwnedEvent{std::string(e.line), e.body}); };
  parser.feed(bytes, keep);
  EXPECT_FALSE(std::holds_alternative<RunResult>(events.back().body));
  parser.finish(keep);
  EXPECT_TRUE(std::holds_alternative<RunResult>(events.back().body));
  size_t count = events.size();
  parser.finish(keep);  // nothing is left to give twice
  EXPECT_EQ(events.size(), count);
}

TEST(StreamJsonParser, AcceptsCrLfAndIgnoresBlankLines) {
  auto events = parse_all("\r\n\n  \n{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"ok\"}\r\n\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].line, R"({"type":"result","subtype":"success","result":"ok"})");
  EXPECT_EQ(std::get<RunResult>(events[0].body).result, "ok");
}

TEST(StreamJsonParser, JoinsTheTextPartsOfAnArrayToolResult) {
  auto events = parse_all(
      R"({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","is_error":true,)"
      R"("content":[{"type":"text","text":"line one"},{"type":"image","source":{"type":"base64","data":"AAAA"}},)"
      R"({"type":"text","text":"line two"}]}]},"parent_tool_use_id":"toolu_parent"})"
      "\n");
  UserMessage user = std::get<UserMessage>(events.at(0).body);
  EXPECT_EQ(user.parent_tool_use_id, "toolu_parent");
  ASSERT_EQ(user.tool_results.size(), 1u);
  EXPECT_EQ(user.tool_results[0].content, "line one\n[image]\nline two");
  EXPECT_TRUE(user.tool_results[0].is_error);
}

}  // namespace
}  // namespace agentbox::agent
