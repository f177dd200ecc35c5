// A socket's deadline (net/deadline.hpp): it passes when it should, moving it later or off
// keeps it from passing, moving it sooner makes it pass sooner, and a gone owner is never called.
#include "net/deadline.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace agentbox::net {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Owner {
  explicit Owner(boost::asio::io_context& io) : deadline(io.get_executor()) {}
  Deadline deadline;
  int expiries = 0;
  Clock::time_point expired_at;
};

class DeadlineTest : public ::testing::Test {
 protected:
  std::shared_ptr<Owner> watched() {
    auto owner = std::make_shared<Owner>(io_);
    owner->deadline.watch(owner, [o = owner.get()] {
      ++o->expiries;
      o->expired_at = Clock::now();
    });
    return owner;
  }
  // Runs the loop for about d.
  void run_for(Clock::duration d) {
    io_.restart();
    io_.run_for(d);
  }
  // Runs fn on the loop after d.
  void at(Clock::duration d, std::function<void()> fn) {
    auto t = std::make_shared<boost::asio::steady_timer>(io_, d);
    t->async_wait([t, fn = std::move(fn)](boost::system::error_code) { fn(); });
  }

  boost::asio::io_context io_;
};

TEST_F(DeadlineTest, PassesOnceWhenItsTimeComes) {
  auto o = watched();
  const auto started = Clock::now();
  o->deadline.expires_after(50ms);
  EXPECT_FALSE(o->deadline.expired());
  run_for(300ms);
  EXPECT_EQ(o->expiries, 1);
  EXPECT_TRUE(o->deadline.expired());
  EXPECT_GE(o->expired_at - started, 50ms);
}

TEST_F(DeadlineTest, MovedLaterPassesAtTheNewTimeAndMovedOffNeverPasses) {
  auto later = watched();
  auto off = watched();
  const auto started = Clock::now();
  later->deadline.expires_after(50ms);
  off->deadline.expires_after(50ms);
  at(20ms, [&] {
    later->deadline.expires_after(150ms);  // now due at ~170 ms
    off->deadline.expires_never();
  });
  run_for(400ms);
  EXPECT_EQ(later->expiries, 1);
  EXPECT_GE(later->expired_at - started, 160ms);
  EXPECT_EQ(off->expiries, 0);
  EXPECT_FALSE(off->deadline.expired());
}

TEST_F(DeadlineTest, MovedSoonerPassesSooner) {
  auto o = watched();
  const auto started = Clock::now();
  o->deadline.expires_after(10s);
  at(20ms, [&] { o->deadline.expires_after(30ms); });
  run_for(500ms);
  EXPECT_EQ(o->expiries, 1);
  EXPECT_LT(o->expired_at - started, 400ms);
}

TEST_F(DeadlineTest, SetAgainAfterPassingItPassesAgain) {
  auto o = watched();
  o->deadline.expires_after(10ms);
  run_for(100ms);
  ASSERT_EQ(o->expiries, 1);
  o->deadline.expires_after(10ms);
  EXPECT_FALSE(o->deadline.expired());
  run_for(100ms);
  EXPECT_EQ(o->expiries, 2);
}

TEST_F(DeadlineTest, CancelledItNeverPassesAndLeavesNoWait) {
  auto o = watched();
  o->deadline.expires_after(20ms);
  o->deadline.cancel();
  io_.restart();
  const size_t ran = io_.run_for(200ms);  // the cancelled wait's end, and nothing pending after
  EXPECT_EQ(o->expiries, 0);
  EXPECT_LE(ran, 1u);
  EXPECT_TRUE(io_.stopped());  // out of work: no timer left waiting
}

TEST_F(DeadlineTest, AnOwnerGoneBeforeTheTimeIsNeverCalled) {
  int calls = 0;
  {
    auto owner = std::make_shared<Owner>(io_);
    owner->deadline.watch(owner, [&calls] { ++calls; });
    owner->deadline.expires_after(10ms);
  }
  run_for(100ms);
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace agentbox::net
