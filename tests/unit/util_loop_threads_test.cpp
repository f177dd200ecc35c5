// LoopThreads: the daemon's one runner of an io_context. Its threads carry the loop's name, a
// handler's escaped exception is reported with that name and the loop runs on, and stop()
// joins them.
#include "util/loop_threads.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <boost/asio/post.hpp>

#include <chrono>
#include <future>
#include <stdexcept>
#include <string>

namespace agentbox {
namespace {

using namespace std::chrono_literals;

std::string this_thread_name() {
  char name[16] = {};
  ::pthread_getname_np(::pthread_self(), name, sizeof name);
  return name;
}

TEST(LoopThreads, ItsThreadsCarryTheLoopsNameCutToWhatTheKernelKeeps) {
  boost::asio::io_context io;
  LoopThreads threads(io, 2, "a-name-longer-than-fifteen");
  EXPECT_EQ(threads.size(), 2u);
  std::promise<std::string> seen;
  boost::asio::post(io, [&] { seen.set_value(this_thread_name()); });
  auto name = seen.get_future();
  ASSERT_EQ(name.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(name.get(), "a-name-longer-t");
}

TEST(LoopThreads, AnEscapedExceptionIsReportedWithTheLoopsNameAndTheLoopRunsOn) {
  boost::asio::io_context io;
  testing::internal::CaptureStderr();
  {
    LoopThreads threads(io, 1, "thrower");
    std::promise<void> after;
    boost::asio::post(io, [] { throw std::runtime_error("a handler's bug"); });
    boost::asio::post(io, [&] { after.set_value(); });
    EXPECT_EQ(after.get_future().wait_for(10s), std::future_status::ready);
    threads.stop();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[thrower] [error] unhandled exception: a handler's bug"), std::string::npos) << err;
}

TEST(LoopThreads, StopJoinsAndIsIdempotentAndAnIdleLoopWaitsForWork) {
  boost::asio::io_context io;
  LoopThreads threads(io, 2, "idle");
  std::this_thread::sleep_for(20ms);  // nothing queued: the work guard keeps run() from returning
  EXPECT_FALSE(io.stopped());
  EXPECT_FALSE(threads.on_loop_thread());
  threads.stop();
  EXPECT_TRUE(io.stopped());
  EXPECT_EQ(threads.size(), 0u);
  threads.stop();
}

TEST(LoopThreads, StopFromOneOfItsOwnThreadsIsRefused) {
  boost::asio::io_context io;
  LoopThreads threads(io, 1, "self-stop");
  std::promise<bool> refused;
  boost::asio::post(io, [&] {
    try {
      threads.stop();
      refused.set_value(false);
    } catch (const std::logic_error&) {
      refused.set_value(true);
    }
  });
  auto f = refused.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(f.get());
}

}  // namespace
}  // namespace agentbox
