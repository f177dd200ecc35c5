// LruCache: never more than its capacity, drops the least recently used, and a look-up counts
// as a use.
#include "util/lru_cache.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace agentbox {
namespace {

using StringCache = LruCache<std::string, int, TransparentStringHash, std::equal_to<>>;

TEST(LruCacheTest, HoldsAtMostItsCapacityAndDropsTheLeastRecentlyInserted) {
  StringCache cache(3);
  for (int i = 0; i < 10; ++i) cache.insert("k" + std::to_string(i), i);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.capacity(), 3u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(cache.find("k" + std::to_string(i)), nullptr) << i;
  for (int i = 7; i < 10; ++i) {
    ASSERT_NE(cache.find("k" + std::to_string(i)), nullptr) << i;
    EXPECT_EQ(*cache.find("k" + std::to_string(i)), i);
  }
}

TEST(LruCacheTest, AFindMakesAnEntryTheMostRecentlyUsed) {
  StringCache cache(2);
  cache.insert("a", 1);
  cache.insert("b", 2);
  ASSERT_NE(cache.find("a"), nullptr);  // now b is the oldest
  cache.insert("c", 3);
  EXPECT_EQ(cache.find("b"), nullptr);
  EXPECT_NE(cache.find("a"), nullptr);
  EXPECT_NE(cache.find("c"), nullptr);
}

TEST(LruCacheTest, InsertingAPresentKeyKeepsItsValueAndMakesItMostRecent) {
  StringCache cache(2);
  cache.insert("a", 1);
  cache.insert("b", 2);
  EXPECT_EQ(cache.insert("a", 100), 1) << "the first value stays, like map::emplace";
  EXPECT_EQ(cache.size(), 2u);
  cache.insert("c", 3);
  EXPECT_EQ(cache.find("b"), nullptr) << "a was used again, so b was the oldest";
  EXPECT_NE(cache.find("a"), nullptr);
}

TEST(LruCacheTest, LooksUpByStringViewWithoutAString) {
  StringCache cache(4);
  cache.insert("alice", 1);
  std::string_view key = "alice";
  ASSERT_NE(cache.find(key), nullptr);
  EXPECT_EQ(*cache.find(key), 1);
  EXPECT_TRUE(cache.erase(key));
  EXPECT_FALSE(cache.erase(key));
  EXPECT_EQ(cache.size(), 0u);
}

TEST(LruCacheTest, EvictOldestStopsAtTheFirstEntryToKeep) {
  StringCache cache(10);
  for (int i = 0; i < 5; ++i) cache.insert("k" + std::to_string(i), i);
  cache.find("k0");  // the oldest becomes the newest
  // Oldest first: k1, k2, k3, k4, k0. Drop while the value is below 3.
  EXPECT_EQ(cache.evict_oldest_while([](const std::string&, int v) { return v < 3; }), 2u);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find("k1"), nullptr);
  EXPECT_EQ(cache.find("k2"), nullptr);
  EXPECT_NE(cache.find("k0"), nullptr) << "recently used: not reached by the walk from the old end";
  EXPECT_EQ(cache.evict_oldest_while([](const std::string&, int) { return true; }), 3u);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.evict_oldest_while([](const std::string&, int) { return true; }), 0u);
}

TEST(LruCacheTest, ADroppedValueIsDestroyedButOneHeldElsewhereLivesOn) {
  LruCache<int, std::shared_ptr<int>> cache(1);
  auto first = std::make_shared<int>(1);
  std::weak_ptr<int> second;
  cache.insert(1, first);
  {
    auto p = std::make_shared<int>(2);
    second = p;
    cache.insert(2, std::move(p));
  }
  EXPECT_EQ(first.use_count(), 1) << "the cache let go of its copy";
  EXPECT_EQ(*first, 1);
  cache.insert(3, std::make_shared<int>(3));
  EXPECT_TRUE(second.expired()) << "nobody else held it: destroyed when dropped";
}

TEST(LruCacheTest, ZeroCapacityIsRefused) { EXPECT_THROW((LruCache<int, int>(0)), std::invalid_argument); }

}  // namespace
}  // namespace agentbox
