// exec/terminal_text: a terminal's output as a model reads it (read_user_terminal).
#include "exec/terminal_text.hpp"

#include <gtest/gtest.h>

namespace agentbox::exec {
namespace {

TEST(ExecTerminalText, StripsColoursCursorMovesAndTitles) {
  EXPECT_EQ(terminal_text("\x1b[1;32muser@box\x1b[0m:\x1b[34m~\x1b[0m$ ls\r\n"), "user@box:~$ ls\n");
  EXPECT_EQ(terminal_text("\x1b]0;user@box: ~\x07$ \x1b[?2004h"), "$ ");             // title (BEL), bracketed paste
  EXPECT_EQ(terminal_text("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b"), "alinkb");  // OSC ended by ST
  EXPECT_EQ(terminal_text("\x1b(B\x1b=x\x1b>"), "x");                                // charset, keypad modes
  EXPECT_EQ(terminal_text("\x1bPq#0;2;0;0;0\x1b\\done"), "done");                    // DCS
}

TEST(ExecTerminalText, AppliesCarriageReturnsAndBackspaces) {
  EXPECT_EQ(terminal_text("one\r\ntwo\r\n"), "one\ntwo\n");
  EXPECT_EQ(terminal_text("progress 10%\rprogress 99%\rdone\n"), "done\n");
  EXPECT_EQ(terminal_text("abc\b \bd"), "abd");
  EXPECT_EQ(terminal_text("x\n\b\by"), "x\ny");           // never past the line's start
  EXPECT_EQ(terminal_text("caf\xC3\xA9\b \b!"), "caf!");  // a whole character
  EXPECT_EQ(terminal_text("a\x07\x0e"
                          "b\tc\x7f"),
            "ab\tc");
}

TEST(ExecTerminalText, CutSequencesAreDroppedNotShownInPart) {
  EXPECT_EQ(terminal_text("text\x1b[1;3"), "text");
  EXPECT_EQ(terminal_text("text\x1b]0;title"), "text");
  EXPECT_EQ(terminal_text("text\x1b"), "text");
  EXPECT_EQ(terminal_text("\xA9 rest"), "\xEF\xBF\xBD rest");  // a cut character: U+FFFD
}

TEST(ExecTerminalText, LastLines) {
  EXPECT_EQ(last_lines("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(last_lines("a\nb\nc", 2), "b\nc");
  EXPECT_EQ(last_lines("a\nb\n", 5), "a\nb\n");
  EXPECT_EQ(last_lines("a\nb\n", 0), "");
  EXPECT_EQ(last_lines("", 3), "");
  EXPECT_EQ(last_lines("\n\n\n", 1), "\n");
}

}  // namespace
}  // namespace agentbox::exec
