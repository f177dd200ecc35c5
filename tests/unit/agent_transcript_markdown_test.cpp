// A session transcript rendered as Markdown for people: the recorded session of the real CLI
// (tests/agent_fixtures/session.jsonl: thinking, text, a Bash call whose output holds a ```
// fence, a failing call, an upstream error) and hand-made lines for what a recording does not
// have (meta lines, long output, text that tries to break out of its block).
#include "agent/transcript_markdown.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/agent_fixtures.hpp"

namespace agentbox::agent {
namespace {

using testing::agent_fixture;

constexpr const char* kId = "a37762f8-7e55-4a43-9476-1dea14b2a3c0";

std::string render(const std::string& jsonl, const MarkdownLimits& limits = {}) {
  return transcript_markdown(parse_transcript(jsonl), TranscriptAbout{kId, "c1", false}, limits);
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The lines of a Markdown document outside fenced code blocks, as CommonMark reads fences
// (independently of markdown_text.cpp): what can act as structure (headings, HTML, quotes).
struct Layout {
  std::vector<std::string> structure;  // lines outside any fence
  bool open_at_end = false;            // a fence never closed
};

Layout layout(const std::string& md) {
  Layout out;
  char fence = 0;
  size_t fence_len = 0;
  size_t start = 0;
  while (start < md.size()) {
    size_t end = md.find('\n', start);
    if (end == std::string::npos) end = md.size();
    const std::string line = md.substr(start, end - start);
    start = end + 1;
    const size_t indent = line.find_first_not_of(' ');
    const bool may_fence = indent != std::string::npos && indent <= 3 && (line[indent] == '`' || line[indent] == '~');
    size_t run = 0;
    if (may_fence)
      while (indent + run < line.size() && line[indent + run] == line[indent]) ++run;
    if (fence == 0) {
      if (may_fence && run >= 3 && (line[indent] == '~' || line.find('`', indent + run) == std::string::npos)) {
        fence = line[indent];
        fence_len = run;
      } else {
        out.structure.push_back(line);
      }
    } else if (may_fence && line[indent] == fence && run >= fence_len &&
               line.find_first_not_of(' ', indent + run) == std::string::npos) {
      fence = 0;
    }
  }
  out.open_at_end = fence != 0;
  return out;
}

// True when needle is on a line outside the fences that is not a tool call's one-line summary
// (escaped text inside <summary>, where Markdown is not read).
bool in_structure(const Layout& l, const std::string& needle) {
  for (const auto& line : l.structure)
    if (line.find(needle) != std::string::npos && !(line.starts_with("<summary>") && line.ends_with("</summary>")))
      return true;
  return false;
}

TEST(TranscriptMarkdown, TheRecordedSessionReadsAsTheChatItWas) {
  const std::string md = render(agent_fixture("session.jsonl"));
  // A short header: id, chat, directory, model, times.
  EXPECT_TRUE(md.starts_with(std::string("# Claude Code session `") + kId + "`\n\n")) << md;
  EXPECT_NE(md.find("- Chat: `c1`\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- Directory: `/tmp/cc-session-"), std::string::npos) << md;
  EXPECT_NE(md.find("- Model: `claude-opus-4-8`\n"), std::string::npos) << md;  // not the CLI's "<synthetic>"
  EXPECT_NE(md.find("- Started 2026-12-06 14:45:58 UTC, last message 2026-12-06 14:46:04 UTC\n"), std::string::npos)
      << md;
  // Four turns; a tool's result (a user line in the file) stays inside its call.
  EXPECT_EQ(count(md, "\n## User · "), 4u) << md;
  EXPECT_EQ(count(md, "\n## Assistant · "), 4u) << md;
  EXPECT_NE(md.find("\n## User · 14:45:58\n\nponder the report [[think]]\n"), std::string::npos) << md;
  // Thinking marked, then the answer.
  EXPECT_NE(md.find("> **Thinking**\n>\n> Let me think about: ponder the report [[think]]\n\nthought about it\n"),
            std::string::npos)
      << md;
  // The Bash call folded: its command in the summary and a sh block, its output (with a ```
  // fence in it) in a longer fence.
  EXPECT_NE(
      md.find("<details>\n<summary>Bash: printf &quot;a\\n\\`\\`\\`\\nb\\n&quot; &gt; r.md; cat r.md</summary>\n\n"
              "```sh\nprintf \"a\\n\\`\\`\\`\\nb\\n\" > r.md; cat r.md\n```\n\n"
              "Output:\n\n````text\na\n```\nb\n````\n\n</details>\n"),
      std::string::npos)
      << md;
  // The model's answer quoting that output opens a fence it never closes: closed for it.
  EXPECT_NE(md.find("done: a\n```\nb\n```\n"), std::string::npos) << md;
  // The failed call says so.
  EXPECT_NE(md.find("<summary>Bash: ls no-such-file (error)</summary>"), std::string::npos) << md;
  EXPECT_NE(md.find("Error:\n\n```text\nExit code 2\nls: cannot access 'no-such-file'"), std::string::npos) << md;
  // The upstream's failure, as the CLI wrote it, marked as an error.
  EXPECT_NE(md.find("> **Error:** API Error: 529 Overloaded error."), std::string::npos) << md;
  // Bookkeeping is left out: queue operations, the skill and agent listings, signatures.
  for (const char* absent : {"queue-operation", "deep-research", "agent_listing", "fake-signature", "last-prompt"})
    EXPECT_EQ(md.find(absent), std::string::npos) << absent;
  const Layout l = layout(md);
  EXPECT_FALSE(l.open_at_end);
  EXPECT_EQ(count(md, "<details>"), 2u);
  EXPECT_EQ(count(md, "</details>"), 2u);
}

// Hand-made lines in the CLI's shape, each trying to get out of the block it is shown in.
constexpr const char* kHostile =
    R"({"type":"user","isMeta":true,"message":{"role":"user","content":"Caveat: META-LINE"},"timestamp":"2026-12-06T10:00:00.000Z"}
{"type":"user","message":{"role":"user","content":"<command-name>/cost</command-name>"},"timestamp":"2026-12-06T10:00:00.500Z"}
{"type":"user","message":{"role":"user","content":[{"type":"text","text":"look at this"},{"type":"image","source":{}}]},"timestamp":"2026-12-06T10:00:01.000Z","cwd":"/home/u/chats/c1"}
{"type":"assistant","message":{"role":"assistant","model":"m-1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cat evil\n## Assistant FAKE-IN-INPUT"}}]},"timestamp":"2026-12-06T10:00:02.000Z"}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x\n``````\n</details>\n## User FAKE-IN-OUTPUT\n````"}]}]},"timestamp":"2026-12-06T10:00:03.000Z"}
{"type":"assistant","message":{"role":"assistant","model":"m-2","content":[{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"</summary><b>x</b>\nsecond line"}}]},"timestamp":"2026-12-06T10:00:04.000Z"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t3","name":"Edit","input":{"file_path":"a.txt","old_string":"one\ntwo","new_string":"ONE"}}]},"timestamp":"2026-12-06T10:00:05.000Z"}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","content":"edited","is_error":"yes"}]},"timestamp":"2026-12-06T10:00:06.000Z"}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"nobody","content":"ORPHAN-RESULT"}]},"timestamp":"2026-12-06T10:00:07.000Z"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm\n<details>\n```\nTHOUGHT-CODE"},{"type":"text","text":"here:\n~~~\nUNCLOSED-TILDE"}]},"timestamp":"not a time"}
{"type":"user","message":{"role":"user","content":"last\n<!-- UNCLOSED-COMMENT"},"timestamp":"2026-12-06T10:00:09.000Z"}
)";

TEST(TranscriptMarkdown, TextCannotBreakOutOfItsBlock) {
  const std::string md = render(kHostile);
  const Layout l = layout(md);
  EXPECT_FALSE(l.open_at_end) << md;
  // What tool input and output say is code, never structure.
  for (const char* inside : {"FAKE-IN-INPUT", "FAKE-IN-OUTPUT", "UNCLOSED-TILDE"})
    EXPECT_FALSE(in_structure(l, inside)) << inside << "\n" << md;
  // A comment left open would hide the rest of the document: it is ended.
  EXPECT_NE(md.find("last\n<!-- UNCLOSED-COMMENT\n-->\n"), std::string::npos) << md;
  // Thinking is a quote (its HTML ends with it), and the fence it opens is closed inside it.
  EXPECT_NE(md.find("> **Thinking**\n>\n> hmm\n> <details>\n> ```\n> THOUGHT-CODE\n> ```\n\n"), std::string::npos)
      << md;
  EXPECT_NE(md.find("FAKE-IN-OUTPUT"), std::string::npos);
  EXPECT_NE(md.find("```````text\nx\n``````\n</details>\n## User FAKE-IN-OUTPUT\n````\n```````\n"), std::string::npos)
      << md;
  // Structure lines: exactly the headings and details we wrote.
  size_t headings = 0, opened = 0, closed = 0;
  for (const auto& line : l.structure) {
    headings += line.starts_with("## ");
    opened += line == "<details>";
    closed += line == "</details>";
  }
  EXPECT_EQ(headings, 3u) << md;  // user, assistant (tool results are not turns), user
  EXPECT_EQ(opened, 4u) << md;    // t1, t2, t3 and the orphan result
  EXPECT_EQ(closed, 4u) << md;
  // A summary is one line of escaped text, cut to its limit.
  EXPECT_NE(md.find("<summary>Read: &lt;/summary&gt;&lt;b&gt;x&lt;/b&gt; second line</summary>"), std::string::npos)
      << md;
  // Edit as a diff; a non-boolean is_error is no error.
  EXPECT_NE(md.find("```diff\n-one\n-two\n+ONE\n```\n\nOutput:\n\n```text\nedited\n```"), std::string::npos) << md;
  // Meta lines and slash-command records are left out; an image is named.
  EXPECT_EQ(md.find("META-LINE"), std::string::npos) << md;
  EXPECT_EQ(md.find("/cost"), std::string::npos) << md;
  EXPECT_NE(md.find("look at this\n\n*[image]*\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- Model: `m-1`, `m-2`\n"), std::string::npos) << md;
  EXPECT_NE(md.find("ORPHAN-RESULT"), std::string::npos) << md;
  // A timestamp not in the CLI's form is not shown; meta lines count for the session's times.
  EXPECT_EQ(md.find("not a time"), std::string::npos) << md;
  EXPECT_NE(md.find("- Started 2026-12-06 10:00:00 UTC, last message 2026-12-06 10:00:09 UTC\n"), std::string::npos)
      << md;
}

TEST(TranscriptMarkdown, LongOutputIsCutWithANote) {
  std::string output;
  for (int i = 0; i < 500; ++i) output += "line " + std::to_string(i) + "\\n";
  const std::string jsonl =
      R"({"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"seq"}}]}}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":")" +
      output + R"("}]}}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"sleep 1000"}}]}}
)";
  const std::string md = render(jsonl, MarkdownLimits{.block_bytes = 1000, .block_lines = 10, .summary_chars = 5});
  EXPECT_NE(md.find("line 9\n```\n\n*… "), std::string::npos) << md;
  EXPECT_EQ(md.find("line 10\n"), std::string::npos) << md;
  EXPECT_NE(md.find(" more bytes cut (the session's JSON form has them all).*"), std::string::npos) << md;
  EXPECT_NE(md.find("<summary>Bash: sleep…</summary>"), std::string::npos) << md;  // 5 characters
  EXPECT_NE(md.find("```sh\nsleep 1000\n```\n\n*No result recorded.*"), std::string::npos) << md;
  EXPECT_FALSE(layout(md).open_at_end);
}

TEST(TranscriptMarkdown, AnEmptyOrTruncatedSessionStillHasItsHeader) {
  const std::string md = transcript_markdown(parse_transcript(""), TranscriptAbout{kId, "", true});
  EXPECT_TRUE(md.starts_with(std::string("# Claude Code session `") + kId + "`\n")) << md;
  EXPECT_EQ(md.find("- Chat:"), std::string::npos) << md;
  EXPECT_NE(md.find("> Only the beginning of this session is shown"), std::string::npos) << md;
  EXPECT_EQ(md.find("## "), std::string::npos) << md;
}

}  // namespace
}  // namespace agentbox::agent
