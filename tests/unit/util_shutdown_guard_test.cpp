// ShutdownGuard: the one guard the loops' owners (ProcessTable, Terminals) run their handlers
// through. Closed, it runs nothing; closing waits for a handler at work; what a handler throws
// is reported with the guard's name, never swallowed silently.
#include "util/shutdown_guard.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

namespace agentbox {
namespace {

using namespace std::chrono_literals;

TEST(ShutdownGuard, RunsUntilClosedThenNothing) {
  ShutdownGuard guard("test");
  int ran = 0;
  EXPECT_TRUE(guard.run([&] { ++ran; }));
  EXPECT_FALSE(guard.closed());
  guard.close();
  EXPECT_TRUE(guard.closed());
  EXPECT_FALSE(guard.run([&] { ++ran; }));
  EXPECT_EQ(ran, 1);
  guard.close();  // idempotent
}

TEST(ShutdownGuard, CloseWaitsForTheHandlerAtWork) {
  ShutdownGuard guard("test");
  std::promise<void> inside;
  std::atomic<bool> finished{false};
  std::thread handler([&] {
    guard.run([&] {
      inside.set_value();
      std::this_thread::sleep_for(100ms);
      finished = true;
    });
  });
  inside.get_future().wait();
  guard.close();
  EXPECT_TRUE(finished.load());  // close() returned only after the handler did
  handler.join();
}

TEST(ShutdownGuard, WhatAHandlerThrowsIsReportedWithTheGuardsName) {
  ShutdownGuard guard("process-table");
  testing::internal::CaptureStderr();
  EXPECT_TRUE(guard.run([] { throw std::runtime_error("store is full"); }));
  EXPECT_TRUE(guard.run([] { throw 42; }));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[process-table] [error] unhandled exception: store is full"), std::string::npos) << err;
  EXPECT_NE(err.find("[process-table] [error] unhandled exception: an exception of unknown type"), std::string::npos)
      << err;
  int ran = 0;
  EXPECT_TRUE(guard.run([&] { ++ran; }));  // and it goes on guarding
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace agentbox
