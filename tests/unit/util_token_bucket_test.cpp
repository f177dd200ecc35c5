// The token bucket behind [egress] connect_rate: a burst, then the rate, and no more.
#include "util/token_bucket.hpp"

#include <gtest/gtest.h>

namespace agentbox {
namespace {

using namespace std::chrono_literals;

TEST(TokenBucket, ABurstThenTheRate) {
  const auto t0 = TokenBucket::Clock::time_point{} + 1h;
  TokenBucket bucket(/*rate=*/10, /*burst=*/10, t0);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(bucket.take(t0)) << i;
  EXPECT_FALSE(bucket.take(t0));
  EXPECT_FALSE(bucket.take(t0 + 99ms));  // a token takes 100 ms to come
  EXPECT_TRUE(bucket.take(t0 + 100ms));
  EXPECT_FALSE(bucket.take(t0 + 100ms));
  // Over a second at the rate: ten more, however they are asked for.
  int taken = 0;
  for (auto t = t0 + 100ms; t <= t0 + 1100ms; t += 1ms) taken += bucket.take(t);
  EXPECT_EQ(taken, 10);
}

TEST(TokenBucket, IdleTimeFillsItOnlyUpToTheBurst) {
  const auto t0 = TokenBucket::Clock::time_point{} + 1h;
  TokenBucket bucket(5, 3, t0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bucket.take(t0));
  EXPECT_FALSE(bucket.full(t0));
  EXPECT_FALSE(bucket.full(t0 + 500ms));  // 2.5 of 3
  EXPECT_TRUE(bucket.full(t0 + 600ms));
  int taken = 0;
  for (int i = 0; i < 10; ++i) taken += bucket.take(t0 + 1h);
  EXPECT_EQ(taken, 3);
  EXPECT_FALSE(bucket.take(t0 + 1h - 1s));  // a clock that seems to go back gives nothing
}

}  // namespace
}  // namespace agentbox
