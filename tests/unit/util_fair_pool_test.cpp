// FairPool: worker threads shared between keys with a per-key cap, taken in turns; no job is lost
// and the destructor runs what is queued.
#include "util/fair_pool.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace agentbox {
namespace {

using namespace std::chrono_literals;

// Jobs that record when they start and then wait until the test releases them by name, so a
// test decides which job ends when and can read the order in which jobs started. A job not
// released ends after 10 s anyway: a test that fails before release_all() must not hang.
class Gates {
 public:
  // A job named `name` of `key` that waits for release(name).
  FairPool::Job job(const std::string& key, const std::string& name) {
    return [this, key, name] {
      std::unique_lock lock(mu_);
      started_.push_back(name);
      max_running_[key] = std::max(max_running_[key], ++running_[key]);
      cv_.notify_all();
      cv_.wait_for(lock, 10s, [&] { return all_open_ || open_.count(name) > 0; });
      --running_[key];
    };
  }

  void release(const std::string& name) {
    std::lock_guard lock(mu_);
    open_[name] = true;
    cv_.notify_all();
  }
  void release_all() {
    std::lock_guard lock(mu_);
    all_open_ = true;
    cv_.notify_all();
  }

  // Waits (up to 10 s) until `n` jobs have started; returns the names in start order.
  std::vector<std::string> started(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return started_.size() >= n; });
    return started_;
  }
  std::vector<std::string> started_now() {
    std::lock_guard lock(mu_);
    return started_;
  }
  // The names of the jobs started so far, sorted: jobs on different threads start in any order.
  std::vector<std::string> started_set() {
    auto names = started_now();
    std::sort(names.begin(), names.end());
    return names;
  }
  int max_running(const std::string& key) {
    std::lock_guard lock(mu_);
    return max_running_[key];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> started_;
  std::map<std::string, int> running_, max_running_;
  std::map<std::string, bool> open_;
  bool all_open_ = false;
};

TEST(FairPool, AKeyRunsNoMoreThanItsLimitAtOnceWhileOtherThreadsServeOtherKeys) {
  Gates gates;
  {
    FairPool pool(4, 2);
    for (int i = 0; i < 6; ++i) pool.post("alice", gates.job("alice", "a" + std::to_string(i)));
    ASSERT_EQ(gates.started(2).size(), 2u);
    // Two threads are idle, yet alice's third job waits for one of hers to end.
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(gates.started_set(), (std::vector<std::string>{"a0", "a1"}));
    // Another key gets an idle thread at once.
    pool.post("bob", gates.job("bob", "b0"));
    EXPECT_EQ(gates.started(3).back(), "b0");
    gates.release("a0");
    EXPECT_EQ(gates.started(4).back(), "a2");
    gates.release_all();
  }
  EXPECT_EQ(gates.started_now().size(), 7u);
  EXPECT_EQ(gates.max_running("alice"), 2);
}

TEST(FairPool, ANewKeysFirstJobGoesBeforeTheRestOfABusyKeysQueue) {
  Gates gates;
  {
    FairPool pool(2, 2);
    for (int i = 0; i < 10; ++i) pool.post("alice", gates.job("alice", "a" + std::to_string(i)));
    ASSERT_EQ(gates.started(2).size(), 2u);
    pool.post("bob", gates.job("bob", "b0"));
    // A FIFO pool would start a2 on the first free thread.
    gates.release("a0");
    EXPECT_EQ(gates.started(3).back(), "b0");
    EXPECT_EQ(gates.started_set(), (std::vector<std::string>{"a0", "a1", "b0"}));
    gates.release_all();
  }
  EXPECT_EQ(gates.started_now().size(), 11u);
}

TEST(FairPool, ANewKeyWaitsForOneFreeThreadNotForABusyKeysTurn) {
  // One thread, alice under her cap: her next job already has a turn when bob comes, yet bob's
  // first job starts when the thread is next free.
  Gates gates;
  {
    FairPool pool(1, 2);
    for (int i = 0; i < 5; ++i) pool.post("alice", gates.job("alice", "a" + std::to_string(i)));
    ASSERT_EQ(gates.started(1).size(), 1u);
    pool.post("bob", gates.job("bob", "b0"));
    gates.release("a0");
    EXPECT_EQ(gates.started(2), (std::vector<std::string>{"a0", "b0"}));
    gates.release_all();
  }
  EXPECT_EQ(gates.started_now().size(), 6u);
}

TEST(FairPool, BusyKeysTakeTurnsAndEachKeysJobsStartInOrder) {
  Gates gates;
  {
    FairPool pool(1, 1);
    pool.post("x", gates.job("x", "x"));  // holds the thread while the rest is queued
    ASSERT_EQ(gates.started(1).size(), 1u);
    for (int i = 0; i < 4; ++i) pool.post("alice", gates.job("alice", "a" + std::to_string(i)));
    for (int i = 0; i < 4; ++i) pool.post("bob", gates.job("bob", "b" + std::to_string(i)));
    gates.release_all();
  }
  EXPECT_EQ(gates.started_now(), (std::vector<std::string>{"x", "a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3"}));
}

TEST(FairPool, TheDestructorRunsEveryQueuedJob) {
  std::atomic<int> done{0};
  {
    FairPool pool(2, 1);
    for (int i = 0; i < 60; ++i)
      pool.post("k" + std::to_string(i % 3), [&] {
        std::this_thread::sleep_for(1ms);
        ++done;
      });
  }
  EXPECT_EQ(done.load(), 60);
}

TEST(FairPool, AJobPostedByARunningJobWhileThePoolIsDestroyedStillRuns) {
  std::atomic<bool> follow_up{false};
  {
    FairPool pool(1, 1);
    pool.post("a", [&] {
      std::this_thread::sleep_for(100ms);  // the destructor has begun by now
      pool.post("a", [&] { follow_up = true; });
    });
  }
  EXPECT_TRUE(follow_up.load());
}

TEST(FairPool, ConcurrentPostsLoseNoJobAndNeverExceedTheCap) {
  constexpr int kPosters = 8, kJobsEach = 400, kKeys = 5;
  struct Counts {
    std::atomic<int> running[kKeys] = {};
    std::atomic<int> max_running[kKeys] = {};
    std::atomic<int> done{0};
  };
  auto counts = std::make_shared<Counts>();
  std::atomic<int> follow_ups{0};
  {
    FairPool pool(4, 2);
    auto job = [&pool, counts, &follow_ups](int key, bool post_more) {
      return [&pool, counts, &follow_ups, key, post_more] {
        int now = ++counts->running[key];
        for (int seen = counts->max_running[key]; now > seen;)
          if (counts->max_running[key].compare_exchange_weak(seen, now)) break;
        std::this_thread::yield();
        --counts->running[key];
        ++counts->done;
        if (post_more) {
          ++follow_ups;
          pool.post("k" + std::to_string(key), [counts] { ++counts->done; });
        }
      };
    };
    std::vector<std::thread> posters;
    for (int t = 0; t < kPosters; ++t)
      posters.emplace_back([&, t] {
        for (int i = 0; i < kJobsEach; ++i) {
          int key = (t + i) % kKeys;
          pool.post("k" + std::to_string(key), job(key, i % 10 == 0));
        }
      });
    for (auto& p : posters) p.join();
  }
  EXPECT_EQ(counts->done.load(), kPosters * kJobsEach + follow_ups.load());
  EXPECT_EQ(follow_ups.load(), kPosters * kJobsEach / 10);
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_LE(counts->max_running[k].load(), 2) << k;
    EXPECT_GE(counts->max_running[k].load(), 1) << k;
  }
}

TEST(FairPool, AnIdlePoolWaitsWithoutSpinning) {
  FairPool pool(4, 2);
  std::atomic<bool> ran{false};
  pool.post("a", [&] { ran = true; });
  auto cpu_ms = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  };
  std::this_thread::sleep_for(50ms);
  double before = cpu_ms();
  std::this_thread::sleep_for(300ms);
  EXPECT_LT(cpu_ms() - before, 30.0);  // four spinning threads would burn ~600 ms on 2 cores
  EXPECT_TRUE(ran.load());
}

// The server's pool is owned through what its jobs hold (a response's session owns the routes,
// which own the pool), so the last owner can go away inside a job, on a worker thread. That
// worker cannot join itself: it is let go, finishes the queue with the others, and nothing is
// lost or used after its end (ASan would see it).
TEST(FairPool, APoolReleasedInsideItsOwnJobFinishesTheQueue) {
  auto pool = std::make_shared<FairPool>(2, 1);
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::atomic<int> ran{0};
  std::promise<void> all_ran;
  for (int i = 0; i < 4; ++i)
    pool->post("other", [&] {
      if (++ran == 5) all_ran.set_value();
    });
  // This job holds the only other reference and drops it last: ~FairPool runs on its thread.
  pool->post("owner", [&, keep = pool]() mutable {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return go; });
    lock.unlock();
    keep.reset();
    if (++ran == 5) all_ran.set_value();
  });
  pool.reset();  // the job's copy is now the last
  {
    std::lock_guard lock(mu);
    go = true;
  }
  cv.notify_all();
  EXPECT_EQ(all_ran.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(ran.load(), 5);
}

TEST(FairPool, ZeroThreadsOrLimitCountAsOne) {
  FairPool pool(0, 0);
  EXPECT_EQ(pool.threads(), 1u);
  EXPECT_EQ(pool.per_key_limit(), 1u);
}

TEST(FairPool, StopRunsWhatIsQueuedJoinsAndIsIdempotent) {
  FairPool pool(2, 1, "stopper");
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i)
    pool.post("k" + std::to_string(i % 3), [&] {
      std::this_thread::sleep_for(1ms);
      ++ran;
    });
  pool.stop();
  EXPECT_EQ(ran.load(), 20);
  EXPECT_EQ(pool.threads(), 2u);  // how many it was made with
  pool.stop();
  pool.post("late", [&] { ++ran; });  // after the workers left: never run
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ran.load(), 20);
}

TEST(FairPool, ItsThreadsCarryThePoolsName) {
  FairPool pool(1, 1, "launcher");
  std::promise<std::string> name;
  pool.post("k", [&] {
    char buf[16] = {};
    ::pthread_getname_np(::pthread_self(), buf, sizeof buf);
    name.set_value(buf);
  });
  EXPECT_EQ(name.get_future().get(), "launcher");
}

}  // namespace
}  // namespace agentbox
