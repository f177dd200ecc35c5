// Where util/utf8 cuts bytes so no character is split: the cut used to shorten text for display,
// and the edges of output cut into answers by byte offsets.
#include "util/utf8.hpp"

#include <gtest/gtest.h>

#include <string>

namespace agentbox {
namespace {

const std::string kEuro = "\xE2\x82\xAC";  // U+20AC, three bytes

TEST(Utf8Cut, StepsBackToTheStartOfTheCharacterItWouldSplit) {
  const std::string s = "ab" + kEuro + "c";
  EXPECT_EQ(utf8_cut(s, 2), 2u);
  EXPECT_EQ(utf8_cut(s, 3), 2u);
  EXPECT_EQ(utf8_cut(s, 4), 2u);
  EXPECT_EQ(utf8_cut(s, 5), 5u);
  EXPECT_EQ(utf8_cut(s, 100), s.size());
}

// No sequence has more than 3 continuation bytes: a run of them (invalid UTF-8) is not walked
// back to the start of the text, which would show nothing of it.
TEST(Utf8Cut, StepsBackOverAtMostThreeContinuationBytes) {
  const std::string s = "a" + std::string(10, '\x80');
  EXPECT_EQ(utf8_cut(s, 8), 5u);
}

TEST(Utf8Edges, AnUnfinishedTailIsTheLeadAndWhatFollowsIt) {
  EXPECT_EQ(utf8_unfinished_tail("ab"), 0u);
  EXPECT_EQ(utf8_unfinished_tail("ab" + kEuro), 0u);
  EXPECT_EQ(utf8_unfinished_tail("ab" + kEuro.substr(0, 1)), 1u);
  EXPECT_EQ(utf8_unfinished_tail("ab" + kEuro.substr(0, 2)), 2u);
  EXPECT_EQ(utf8_unfinished_tail(std::string(4, '\x80')), 0u);  // no lead byte in reach
}

TEST(Utf8Edges, AnOrphanHeadIsTheContinuationBytesBeforeTheFirstLead) {
  EXPECT_EQ(utf8_orphan_head("abc"), 0u);
  EXPECT_EQ(utf8_orphan_head(kEuro.substr(1) + "x"), 2u);
  EXPECT_EQ(utf8_orphan_head(kEuro.substr(2) + "x"), 1u);
  EXPECT_EQ(utf8_orphan_head(std::string(6, '\x80')), 3u);
}

}  // namespace
}  // namespace agentbox
