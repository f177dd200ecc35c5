// ReplayBuffer: the newest bytes of a terminal's output, bounded, in order, never starting
// inside a UTF-8 character.
#include "exec/replay_buffer.hpp"

#include <gtest/gtest.h>

#include <string>

namespace agentbox::exec {
namespace {

TEST(ReplayBufferTest, KeepsEverythingUpToItsCapacityInOrder) {
  ReplayBuffer b(10);
  EXPECT_EQ(b.contents(), "");
  b.append("abc");
  b.append("");
  b.append("defg");
  EXPECT_EQ(b.contents(), "abcdefg");
  b.append("hij");
  EXPECT_EQ(b.contents(), "abcdefghij");
  EXPECT_EQ(b.size(), 10u);
}

TEST(ReplayBufferTest, KeepsOnlyTheNewestBytesHoweverTheyArrive) {
  ReplayBuffer b(10);
  std::string all;
  for (int i = 0; i < 100; ++i) {
    std::string piece(static_cast<size_t>(i % 7), static_cast<char>('a' + i % 26));
    piece += std::to_string(i);
    b.append(piece);
    all += piece;
    ASSERT_EQ(b.contents(), all.substr(all.size() > 10 ? all.size() - 10 : 0)) << "after piece " << i;
    ASSERT_LE(b.size(), 10u);
  }
}

TEST(ReplayBufferTest, AnAppendLargerThanTheCapacityKeepsItsTail) {
  ReplayBuffer b(8);
  b.append("xy");
  b.append("0123456789abcdef");
  EXPECT_EQ(b.contents(), "89abcdef");
  b.append("Z");
  EXPECT_EQ(b.contents(), "9abcdefZ");
}

TEST(ReplayBufferTest, StartsAtACharacterBoundaryOnceTheStartWasCut) {
  ReplayBuffer b(5);
  b.append("ab\xc3\xa9");  // "abé": whole, nothing cut yet
  EXPECT_EQ(b.contents(), "ab\xc3\xa9");
  b.append("\xe2\x82\xac!");  // "€!": the ring now starts inside "é"
  EXPECT_EQ(b.contents(), "\xe2\x82\xac!");
  ReplayBuffer whole(4);
  whole.append("\xc3\xa9xy");  // exactly full, nothing dropped: kept as is
  EXPECT_EQ(whole.contents(), "\xc3\xa9xy");
}

}  // namespace
}  // namespace agentbox::exec
