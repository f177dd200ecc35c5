// Markdown pieces that hold text of unknown content: fences longer than any backtick run in the
// text, code spans, HTML-escaped summaries, a fence left open closed, cuts at character edges.
#include "agent/markdown_text.hpp"

#include <gtest/gtest.h>

namespace agentbox::agent {
namespace {

TEST(FencedBlock, TheFenceIsLongerThanAnyRunOfBackticksInTheBody) {
  EXPECT_EQ(fenced_block("plain", "sh"), "```sh\nplain\n```\n");
  EXPECT_EQ(fenced_block("a\n```\nb\n", "text"), "````text\na\n```\nb\n````\n");
  EXPECT_EQ(fenced_block("x ``````` y", ""), "````````\nx ``````` y\n````````\n");
  EXPECT_EQ(fenced_block("", "json"), "```json\n```\n");
}

TEST(InlineCode, StaysOneSpanOnOneLine) {
  EXPECT_EQ(inline_code("/home/a/chats/c1"), "`/home/a/chats/c1`");
  EXPECT_EQ(inline_code("a`b"), "``a`b``");
  EXPECT_EQ(inline_code("`x``"), "``` `x`` ```");
  EXPECT_EQ(inline_code("one\ntwo\r"), "`one two `");
}

TEST(HtmlText, EscapesMarkupAndJoinsLines) {
  EXPECT_EQ(html_text("</summary><b a='1'>&\"\nnext"), "&lt;/summary&gt;&lt;b a=&#39;1&#39;&gt;&amp;&quot; next");
}

TEST(CloseOpenBlocks, ClosesWhatTheTextLeavesOpenAndNothingElse) {
  EXPECT_EQ(close_open_blocks("done: a\n```\nb"), "done: a\n```\nb\n```\n");
  EXPECT_EQ(close_open_blocks("x\n````py\ncode\n```\n"), "x\n````py\ncode\n```\n````\n");  // ``` does not close ````
  EXPECT_EQ(close_open_blocks("~~~\n```\n"), "~~~\n```\n~~~\n");
  EXPECT_EQ(close_open_blocks("```sh\nls\n```\ntext"), "```sh\nls\n```\ntext");
  EXPECT_EQ(close_open_blocks("   ```\nx\n   ```  \n"), "   ```\nx\n   ```  \n");
  EXPECT_EQ(close_open_blocks("```a` is code, not a fence"), "```a` is code, not a fence");
  EXPECT_EQ(close_open_blocks("    ```\nindented code, not a fence"), "    ```\nindented code, not a fence");
  EXPECT_EQ(close_open_blocks(""), "");
}

TEST(CloseOpenBlocks, EndsAnHtmlBlockThatWouldTakeInTheRest) {
  EXPECT_EQ(close_open_blocks("see\n<!-- note\nmore"), "see\n<!-- note\nmore\n-->\n");
  EXPECT_EQ(close_open_blocks("<!-- a -->\nafter"), "<!-- a -->\nafter");
  EXPECT_EQ(close_open_blocks("<!--\nx\n-->\n"), "<!--\nx\n-->\n");
  EXPECT_EQ(close_open_blocks("<PRE class=x>\ncode"), "<PRE class=x>\ncode\n</pre>\n");
  EXPECT_EQ(close_open_blocks("<script>\nx</STYLE>\nafter"), "<script>\nx</STYLE>\nafter");  // any of the four ends it
  EXPECT_EQ(close_open_blocks("<?php\necho"), "<?php\necho\n?>\n");
  EXPECT_EQ(close_open_blocks("<!DOCTYPE html\n"), "<!DOCTYPE html\n>\n");
  EXPECT_EQ(close_open_blocks("<![CDATA[ x"), "<![CDATA[ x\n]]>\n");
  EXPECT_EQ(close_open_blocks("<preview> is a tag, a blank line ends it\n"),
            "<preview> is a tag, a blank line ends it\n");
  EXPECT_EQ(close_open_blocks("```\n<!--\n```\n"), "```\n<!--\n```\n");  // in code, not HTML
  EXPECT_EQ(close_open_blocks("<!--\n```\n"), "<!--\n```\n-->\n");       // in HTML, not a fence
}

TEST(Blockquote, EveryLineIsInTheQuote) {
  EXPECT_EQ(blockquote("a\n\nb"), "> a\n>\n> b\n");
  EXPECT_EQ(blockquote("a\n"), "> a\n");
}

TEST(CutText, KeepsLinesAndBytesAndNeverSplitsACharacter) {
  CutText all = cut_text("a\nb\n", 100, 10);
  EXPECT_EQ(all.kept, "a\nb\n");
  EXPECT_EQ(all.cut_bytes, 0u);
  CutText lines = cut_text("1\n2\n3\n4\n", 100, 2);
  EXPECT_EQ(lines.kept, "1\n2\n");
  EXPECT_EQ(lines.cut_bytes, 4u);
  CutText bytes = cut_text("\xc3\xa9\xc3\xa9\xc3\xa9", 3, 10);  // "ééé": 3 bytes end inside the second
  EXPECT_EQ(bytes.kept, "\xc3\xa9");
  EXPECT_EQ(bytes.cut_bytes, 4u);
}

}  // namespace
}  // namespace agentbox::agent
