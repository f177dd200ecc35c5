// The terminals' loop: work posted from other threads runs there in order, a watched descriptor
// calls its handler while ready (level-triggered) and not after unwatch (not even later in the
// same batch), timers run in deadline order unless cancelled, and stop() drops what is left.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "support/sigpipe_ignored.hpp"
#include "util/terminal_loop.hpp"

namespace agentbox {
namespace {

using namespace std::chrono_literals;

// Runs fn on the loop and waits for it.
template <class Fn>
void on_loop(TerminalLoop& loop, Fn fn) {
  std::promise<void> done;
  loop.post([&] {
    fn();
    done.set_value();
  });
  ASSERT_EQ(done.get_future().wait_for(5s), std::future_status::ready);
}

TEST(TerminalLoop, PostedWorkRunsOnTheLoopInOrder) {
  TerminalLoop loop("test");
  std::vector<int> seen;
  for (int i = 0; i < 100; ++i) loop.post([&seen, i] { seen.push_back(i); });
  on_loop(loop, [&] { EXPECT_TRUE(loop.on_loop_thread()); });
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_FALSE(loop.on_loop_thread());
}

TEST(TerminalLoop, AReadyDescriptorCallsItsHandlerUntilDrainedAndNeverAfterUnwatch) {
  TerminalLoop loop("test");
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  std::atomic<int> calls{0};
  std::promise<void> drained;
  TerminalLoop::WatchId id = 0;
  on_loop(loop, [&] {
    id = loop.watch(sv[0], EPOLLIN, [&](uint32_t events) {
      EXPECT_TRUE(events & EPOLLIN);
      char c;
      // One byte per call: level-triggered, so the rest calls again.
      ASSERT_EQ(::read(sv[0], &c, 1), 1);
      if (++calls == 3) {
        loop.unwatch(id);
        drained.set_value();
      }
    });
  });
  ASSERT_EQ(::write(sv[1], "abcdef", 6), 6);
  ASSERT_EQ(drained.get_future().wait_for(5s), std::future_status::ready);
  on_loop(loop, [] {});  // one more turn: no call for the three bytes left
  EXPECT_EQ(calls.load(), 3);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(TerminalLoop, TimersRunInDeadlineOrderAndACancelledOneNever) {
  TerminalLoop loop("test");
  std::vector<int> order;
  std::promise<void> last;
  on_loop(loop, [&] {
    const auto now = TerminalLoop::Clock::now();
    loop.at(now + 60ms, [&] {
      order.push_back(3);
      last.set_value();
    });
    loop.at(now + 20ms, [&] { order.push_back(1); });
    const auto cancelled = loop.at(now + 30ms, [&] { order.push_back(99); });
    loop.at(now + 40ms, [&] { order.push_back(2); });
    loop.cancel(cancelled);
  });
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(last.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

// The loop sleeps with no timeout: its one kernel timer must always be at the earliest deadline,
// whether that came in after a later one was armed, lies in the past, or was set by a timer as
// it ran; and a cancelled timer, armed already, never runs while the one after it still does.
TEST(TerminalLoop, TheEarliestTimerWakesTheLoopWhateverCameBefore) {
  TerminalLoop loop("test");
  using Clock = TerminalLoop::Clock;
  std::promise<Clock::duration> early, after_cancel, past, chained;
  const auto start = Clock::now();
  on_loop(loop, [&] { loop.at(start + 1h, [] {}); });  // armed first, far away
  on_loop(loop, [&] { loop.at(start + 30ms, [&] { early.set_value(Clock::now() - start); }); });
  auto got = early.get_future();
  ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
  EXPECT_GE(got.get(), 30ms);

  const auto t1 = Clock::now();
  TerminalLoop::TimerId first = 0;
  on_loop(loop, [&] { first = loop.at(t1 + 20ms, [] { ADD_FAILURE() << "cancelled timer ran"; }); });
  on_loop(loop, [&] {  // a turn later: the kernel timer is at t1 + 20ms by now
    loop.at(t1 + 50ms, [&] { after_cancel.set_value(Clock::now() - t1); });
    loop.cancel(first);
  });
  got = after_cancel.get_future();
  ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
  EXPECT_GE(got.get(), 50ms);

  const auto t2 = Clock::now();
  on_loop(loop, [&] { loop.at(t2 - 1s, [&] { past.set_value(Clock::now() - t2); }); });
  got = past.get_future();
  ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
  EXPECT_LT(got.get(), 1s);

  const auto t3 = Clock::now();
  on_loop(loop, [&] { loop.after(10ms, [&] { loop.after(20ms, [&] { chained.set_value(Clock::now() - t3); }); }); });
  got = chained.get_future();
  ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
  EXPECT_GE(got.get(), 30ms);
}

TEST(TerminalLoop, StopDropsWhatIsLeftAndLaterPostsAreIgnored) {
  auto owned = std::make_shared<int>(7);
  std::weak_ptr<int> weak = owned;
  {
    TerminalLoop loop("test");
    on_loop(loop, [&, owned = std::move(owned)]() mutable {
      loop.after(1h, [owned] {});  // never due: dropped by stop(), and what it holds with it
    });
    loop.stop();
    EXPECT_TRUE(weak.expired());
    bool ran = false;
    loop.post([&] { ran = true; });
    loop.stop();  // idempotent
    EXPECT_FALSE(ran);
  }
}

}  // namespace
}  // namespace agentbox
