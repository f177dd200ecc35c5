// Process ids are the process store's global key: ids drawn in one second, on several threads
// (several accounts' strands), must not repeat.
#include <gtest/gtest.h>

#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exec/process_id.hpp"

namespace agentbox::exec {
namespace {

TEST(ProcessId, IsTheStartTimeAndARandomPart) {
  EXPECT_TRUE(std::regex_match(new_process_id(), std::regex(R"(\d{8}-\d{6}-[0-9a-f]{12})")));
}

// 200,000 draws: with 24 random bits a repeat is all but certain (expected ~1,200), with 48 bits
// its chance is below 1e-4.
TEST(ProcessId, ManyDrawsOnSeveralThreadsNeverRepeatTheRandomPart) {
  std::mutex mu;
  std::set<std::string> seen;
  size_t repeats = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      std::vector<std::string> mine;
      for (int i = 0; i < 50'000; ++i) {
        const std::string id = new_process_id();
        mine.push_back(id.substr(id.rfind('-') + 1));  // the random part alone: seconds change
      }
      std::lock_guard lock(mu);
      for (auto& r : mine) repeats += !seen.insert(std::move(r)).second;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(repeats, 0u);
}

}  // namespace
}  // namespace agentbox::exec
