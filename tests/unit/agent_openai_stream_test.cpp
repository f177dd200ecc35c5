// Claude Code runs (recorded stream-json, tests/agent_fixtures/) rendered as OpenAI chat
// completion chunks the way Open WebUI reads them: text once, thinking as reasoning, each tool
// call as one <details> block with its result, errors as readable text, usage at the end.
#include "agent/openai_stream.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "agent/sse_frames.hpp"
#include "support/agent_fixtures.hpp"

namespace agentbox::agent {
namespace {

using nlohmann::json;
using testing::agent_fixture;
using testing::parse_all;

struct Rendered {
  std::vector<json> chunks;
  std::string content, reasoning;  // the deltas joined, as a client sees them
  json last;                       // the final chunk
  json completion;
};

Rendered render_events(const std::vector<testing::OwnedEvent>& events, const RunEnd& end = {},
                       std::string_view trailer = {}, OpenAiStream::Options options = {}) {
  OpenAiStream render("claude-code", "chatcmpl-test", 1700000000, options);
  Rendered r;
  for (const auto& e : events)
    for (json& c : render.on(testing::view(e))) r.chunks.push_back(std::move(c));
  for (json& c : render.finish(end, trailer)) r.chunks.push_back(std::move(c));
  for (const json& c : r.chunks) {
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("content")) r.content += delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) r.reasoning += delta["reasoning_content"].get<std::string>();
  }
  r.last = r.chunks.back();
  r.completion = render.completion();
  return r;
}

Rendered render_fixture(const std::string& name, size_t step = 0) {
  return render_events(parse_all(agent_fixture(name), step), RunEnd{0, {}, false, {}});
}

// Decodes the character references html_attribute_escape writes, and numeric ones in general:
// what a browser (and Open WebUI's html-entities decode) does with an attribute value.
std::string html_unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '&') {
      out += s[i++];
      continue;
    }
    size_t semi = s.find(';', i);
    std::string_view ref = s.substr(i + 1, semi - i - 1);
    if (ref == "amp")
      out += '&';
    else if (ref == "lt")
      out += '<';
    else if (ref == "gt")
      out += '>';
    else if (ref == "quot")
      out += '"';
    else if (ref.size() > 2 && ref[0] == '#' && (ref[1] == 'x' || ref[1] == 'X'))
      out += static_cast<char>(std::stoi(std::string(ref.substr(2)), nullptr, 16));
    else if (ref.size() > 1 && ref[0] == '#')
      out += static_cast<char>(std::stoi(std::string(ref.substr(1))));
    else
      ADD_FAILURE() << "unexpected reference &" << ref << ";";
    i = semi + 1;
  }
  return out;
}

// The value of attribute `name` in the first <details> tag of content, still escaped.
std::string attribute(const std::string& content, const std::string& name) {
  size_t tag = content.find("<details ");
  size_t end = content.find('>', tag);
  size_t at = content.find(" " + name + "=\"", tag);
  if (tag == std::string::npos || at == std::string::npos || at > end) return "<missing>";
  at += name.size() + 3;
  return content.substr(at, content.find('"', at) - at);
}

const std::string kBashBlock =
    "<details type=\"tool_calls\" done=\"true\" id=\"toolu_fake_bash_1\" name=\"Bash\" arguments=\""
    "{&quot;command&quot;:&quot;printf &#x27;a,b\\\\n1,2\\\\n&#x27; &gt; report.csv &amp;&amp; cat report.csv&quot;,"
    "&quot;description&quot;:&quot;Write \\&quot;report.csv\\&quot; &lt;demo&gt;&quot;}\" "
    "result=\"&quot;a,b\\n1,2&quot;\" files=\"\" embeds=\"\">\n<summary>Tool Executed</summary>\n</details>\n";

TEST(OpenAiStream, StreamsAPlainAnswerOnceWithRoleAndUsage) {
  Rendered r = render_fixture("text.jsonl");
  const std::string answer = "Hello from the fake upstream.\nSecond line & <tags>.";
  EXPECT_EQ(r.content, answer);  // the partials' text; the assistant message adds nothing
  EXPECT_EQ(r.reasoning, "");
  ASSERT_GE(r.chunks.size(), 4u);  // three text deltas and the end
  EXPECT_EQ(r.chunks[0]["choices"][0]["delta"]["role"], "assistant");
  for (size_t i = 0; i < r.chunks.size(); ++i) {
    const json& c = r.chunks[i];
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], "chatcmpl-test");
    EXPECT_EQ(c["model"], "claude-code");
    EXPECT_EQ(c["created"], 1700000000);
    EXPECT_FALSE(c["choices"][0]["delta"].contains("tool_calls"));
    if (i > 0) {
      EXPECT_FALSE(c["choices"][0]["delta"].contains("role"));
    }
    if (i + 1 < r.chunks.size()) {
      EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
    }
  }
  EXPECT_EQ(r.last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r.last["choices"][0]["delta"], json::object());
  // input 42 + cache creation 7 + cache read 3; output 17.
  EXPECT_EQ(r.last["usage"], (json{{"prompt_tokens", 52},
                                   {"completion_tokens", 17},
                                   {"total_tokens", 69},
                                   {"prompt_tokens_details", {{"cached_tokens", 3}}}}));

  EXPECT_EQ(r.completion["object"], "chat.completion");
  EXPECT_EQ(r.completion["choices"][0]["message"], (json{{"role", "assistant"}, {"content", answer}}));
  EXPECT_EQ(r.completion["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r.completion["usage"], r.last["usage"]);
}

TEST(OpenAiStream, ShowsAToolCallWithItsResultAsOneDetailsBlock) {
  const std::string expected = "I'll create the file.\n" + kBashBlock + "I wrote report.csv with two rows.";
  // Without partial messages the text comes from the assistant messages; with them, from the
  // partials: the same answer either way, nothing doubled.
  EXPECT_EQ(render_fixture("bash_nopartial.jsonl").content, expected);
  Rendered r = render_fixture("bash.jsonl");
  EXPECT_EQ(r.content, expected);
  EXPECT_EQ(r.completion["choices"][0]["message"]["content"], expected);
  EXPECT_EQ(r.last["usage"]["completion_tokens"], 34);
  for (const json& c : r.chunks) EXPECT_FALSE(c["choices"][0]["delta"].contains("tool_calls"));

  // What Open WebUI's Collapsible gets back from the attributes: the input and the result.
  json input = json::parse(html_unescape(attribute(r.content, "arguments")));
  EXPECT_EQ(input["command"], "printf 'a,b\\n1,2\\n' > report.csv && cat report.csv");
  EXPECT_EQ(input["description"], "Write \"report.csv\" <demo>");
  EXPECT_EQ(json::parse(html_unescape(attribute(r.content, "result"))), "a,b\n1,2");
  // Nothing in the tag can end an attribute or the tag early.
  std::string tag = r.content.substr(r.content.find("<details "),
                                     r.content.find('>', r.content.find("<details ")) - r.content.find("<details "));
  EXPECT_EQ(tag.find('\n'), std::string::npos);
  EXPECT_EQ(tag.find('<', 1), std::string::npos);
}

TEST(OpenAiStream, GivesTheSameAnswerForAnyChunkingOfTheOutput) {
  for (const char* name : {"text.jsonl", "bash.jsonl", "thinking.jsonl", "error529.jsonl"}) {
    Rendered whole = render_fixture(name);
    Rendered bytewise = render_fixture(name, 1);
    EXPECT_EQ(bytewise.content, whole.content) << name;
    EXPECT_EQ(bytewise.reasoning, whole.reasoning) << name;
    EXPECT_EQ(bytewise.last, whole.last) << name;
  }
}

TEST(OpenAiStream, StreamsThinkingAsReasoningContent) {
  Rendered r = render_fixture("thinking.jsonl");
  EXPECT_EQ(r.reasoning, "Let me think about this carefully.");
  EXPECT_EQ(r.content, "The answer is 4.");
  // Reasoning comes first, in its own deltas.
  EXPECT_TRUE(r.chunks[0]["choices"][0]["delta"].contains("reasoning_content"));
  EXPECT_EQ(r.completion["choices"][0]["message"]["reasoning_content"], "Let me think about this carefully.");
}

TEST(OpenAiStream, ShowsAnUpstreamErrorOnceAsText) {
  Rendered r = render_fixture("error529.jsonl");
  const std::string error =
      "API Error: 529 Overloaded. This is a server-side issue, usually temporary \xe2\x80\x94 try again in a moment. "
      "If it persists, check your inference gateway (127.0.0.1:18765).";
  EXPECT_EQ(r.content, error);  // from the synthetic message; the result repeats it and is not shown twice
  EXPECT_EQ(r.last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r.last["usage"]["total_tokens"], 0);
}

TEST(OpenAiStream, ShowsAResultErrorWithoutTextAsASentence) {
  Rendered r = render_fixture("maxturns.jsonl");
  EXPECT_EQ(
      r.content,
      "I'll create the file.\n" + kBashBlock +
          "\nClaude Code stopped: it reached the maximum number of turns.\n- Reached maximum number of turns (1)");
  EXPECT_EQ(r.last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r.completion["choices"][0]["finish_reason"], "length");

  auto during =
      parse_all(R"({"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Working on it."}]}})"
                "\n"
                R"({"type":"result","subtype":"error_during_execution","is_error":true,"errors":["Tool crashed"]})"
                "\n");
  EXPECT_EQ(render_events(during).content,
            "Working on it.\n\nClaude Code stopped because of an error during execution.\n- Tool crashed");
  auto unknown = parse_all(R"({"type":"result","subtype":"error_something_new","is_error":true})"
                           "\n");
  EXPECT_EQ(render_events(unknown).content, "Claude Code stopped with an error (error_something_new).");
}

TEST(OpenAiStream, MarksARefusedToolCallsResultAsAnError) {
  Rendered r = render_fixture("denied.jsonl");
  EXPECT_EQ(json::parse(html_unescape(attribute(r.content, "result"))),
            "Error: Output redirection to '/tmp/cc/work-denied/report.csv' was blocked. For security, Claude Code may "
            "only write to files in the allowed working directories for this session: '/tmp/cc/work-denied'.");
}

// The recording without its result line: what a CLI that crashed or was killed leaves.
std::vector<testing::OwnedEvent> without_result(const std::string& name) {
  auto events = parse_all(agent_fixture(name));
  EXPECT_TRUE(std::holds_alternative<RunResult>(events.back().body));
  events.pop_back();
  return events;
}

TEST(OpenAiStream, SaysHowTheCliEndedWhenItGaveNoResult) {
  auto events = without_result("text.jsonl");
  events.push_back(
      testing::OwnedEvent{"Segmentation fault (core dumped)", Diagnostic{"Segmentation fault (core dumped)"}});
  Rendered r = render_events(events, RunEnd{{}, 11, false, "node: fatal ```error```\n"});
  EXPECT_EQ(r.content,
            "Hello from the fake upstream.\nSecond line & <tags>.\n\n"
            "Claude Code ended without finishing its answer (signal SIGSEGV).\n\n"
            "````text\nSegmentation fault (core dumped)\nnode: fatal ```error```\n````");
  EXPECT_EQ(r.last["choices"][0]["finish_reason"], "stop");
  // Usage from the partial stream when there is no result: 42+7+3 in, 17 out.
  EXPECT_EQ(r.last["usage"]["prompt_tokens"], 52);
  EXPECT_EQ(r.last["usage"]["completion_tokens"], 17);

  Rendered exited = render_events(parse_all(""), RunEnd{3, {}, false, ""});
  EXPECT_EQ(exited.content, "Claude Code ended without finishing its answer (exit code 3).");
  EXPECT_EQ(exited.chunks.size(), 2u);  // the text, then the end

  Rendered stopped = render_events(without_result("text.jsonl"), RunEnd{{}, 2, true, "noise"});
  EXPECT_EQ(stopped.content,
            "Hello from the fake upstream.\nSecond line & <tags>.\n\nThe run was interrupted before Claude Code "
            "finished its answer.");
}

TEST(OpenAiStream, ClosesAToolCallLeftWithoutResult) {
  auto events = parse_all(agent_fixture("bash_nopartial.jsonl"));
  events.resize(3);  // init, text, tool_use
  Rendered r = render_events(events, RunEnd{{}, 9, false, ""});
  EXPECT_EQ(json::parse(html_unescape(attribute(r.content, "result"))),
            "(no result: the run ended before this tool finished)");
  EXPECT_EQ(r.content.rfind("I'll create the file.\n<details type=\"tool_calls\" done=\"true\"", 0), 0u);
}

TEST(OpenAiStream, AppendsTheTrailerBeforeTheEnd) {
  Rendered r = render_events(parse_all(agent_fixture("text.jsonl")), RunEnd{0, {}, false, ""},
                             "Files: [report.csv](https://box.example/files/view?path=report.csv&token=t)");
  EXPECT_EQ(r.content,
            "Hello from the fake upstream.\nSecond line & <tags>.\n\nFiles: "
            "[report.csv](https://box.example/files/view?path=report.csv&token=t)");
  EXPECT_EQ(r.last["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAiStream, ShowsTheResultTextWhenNoTextArrivedBefore) {
  auto events = parse_all(R"({"type":"result","subtype":"success","is_error":false,"result":"Done."})"
                          "\n");
  EXPECT_EQ(render_events(events).content, "Done.");
}

TEST(OpenAiStream, LeavesOutSubagentsOwnMessages) {
  auto events = parse_all(
      R"({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"task1","name":"Task","input":{"prompt":"look"}}]}})"
      "\n"
      R"({"type":"assistant","parent_tool_use_id":"task1","message":{"id":"m2","content":[{"type":"text","text":"inner thoughts"},)"
      R"({"type":"tool_use","id":"inner1","name":"Read","input":{}}]}})"
      "\n"
      R"({"type":"stream_event","parent_tool_use_id":"task1","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"inner partial"}}})"
      "\n"
      R"({"type":"user","parent_tool_use_id":"task1","message":{"content":[{"type":"tool_result","tool_use_id":"inner1","content":"file"}]}})"
      "\n"
      R"({"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"task1","content":[{"type":"text","text":"found it"}]}]}})"
      "\n");
  Rendered r = render_events(events);
  EXPECT_EQ(r.content.find("inner"), std::string::npos);
  EXPECT_EQ(attribute(r.content, "name"), "Task");
  EXPECT_EQ(json::parse(html_unescape(attribute(r.content, "result"))), "found it");
  EXPECT_EQ(r.content.find("<details", 1), std::string::npos);  // one block only
}

TEST(OpenAiStream, CutsALongToolResultAtACharacterBoundary) {
  std::string result;
  for (int i = 0; i < 100; ++i) result += "\xc3\xa9";  // 200 bytes of "é"
  json line = {{"type", "user"},
               {"message", {{"content", {{{"type", "tool_result"}, {"tool_use_id", "t"}, {"content", result}}}}}}};
  OpenAiStream::Options options;
  options.max_tool_result_bytes = 11;  // inside the sixth character
  Rendered r = render_events(parse_all(line.dump() + "\n"), RunEnd{}, {}, options);
  EXPECT_EQ(json::parse(html_unescape(attribute(r.content, "result"))),
            "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\n\xe2\x80\xa6 (190 more bytes)");
}

TEST(OpenAiStream, SaysNothingMoreAfterFinish) {
  auto events = parse_all(agent_fixture("text.jsonl"));
  OpenAiStream render("claude-code", "id", 1);
  render.finish(RunEnd{});
  EXPECT_TRUE(render.finished());
  for (const auto& e : events) EXPECT_TRUE(render.on(testing::view(e)).empty());
  EXPECT_TRUE(render.finish(RunEnd{}).empty());
}

TEST(OpenAiStream, KeepsTheSessionIdForTheNextTurn) {
  OpenAiStream render("claude-code", "id", 1);
  auto events = parse_all(agent_fixture("bash.jsonl"));
  render.on(testing::view(events.front()));
  EXPECT_EQ(render.session_id(), "49183823-9af2-4580-a044-00236011e5cc");
  for (const auto& e : events) render.on(testing::view(e));
  ASSERT_TRUE(render.result());
  EXPECT_EQ(render.result()->num_turns, 2u);
}

TEST(OpenAiStream, EveryChunkIsOneSseDataFrame) {
  Rendered r = render_fixture("bash.jsonl");
  for (const json& c : r.chunks) {
    std::string frame = sse::json_data(c);
    EXPECT_EQ(frame.rfind("data: {", 0), 0u);
    EXPECT_EQ(frame.find('\n'), frame.size() - 2);  // no line break before the frame's end
    EXPECT_EQ(json::parse(frame.substr(6)), c);
  }
}

TEST(OpenAiStream, SurvivesMangledOutputAndStillEndsTheAnswer) {
  // The CLI's stdout is untrusted input: recordings with bytes overwritten, dropped and
  // duplicated must give a well-formed stream (no throw, a final chunk), whatever they mean.
  std::mt19937 random(15);
  for (const char* name : {"bash.jsonl", "thinking.jsonl", "error529.jsonl"}) {
    const std::string original = agent_fixture(name);
    for (int round = 0; round < 100; ++round) {
      std::string bytes = original;
      for (int edit = 0; edit < 20; ++edit) {
        size_t at = random() % bytes.size();
        switch (random() % 3) {
          case 0: bytes[at] = static_cast<char>(random() % 256); break;
          case 1: bytes.erase(at, random() % 64); break;
          default: bytes.insert(at, bytes.substr(at / 2, random() % 64)); break;
        }
        if (bytes.empty()) bytes = "x";
      }
      Rendered r;
      ASSERT_NO_THROW(r = render_events(parse_all(bytes, 1 + random() % 512), RunEnd{1, {}, false, "stderr"}))
          << name << " round " << round;
      EXPECT_FALSE(r.last["choices"][0]["finish_reason"].is_null());
      EXPECT_TRUE(r.last.contains("usage"));
      for (const json& c : r.chunks) EXPECT_NO_THROW(sse::json_data(c));
    }
  }
}

}  // namespace
}  // namespace agentbox::agent
