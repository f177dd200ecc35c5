#pragma once
// One thread and one epoll set, for the daemon's hottest small relay: terminals (a keystroke in,
// its echo out). Where an asio io_context runs a scheduler pass and a reactor pass per handler
// (several epoll_wait and an epoll_ctl per keystroke, bench/RESULTS.md), this loop does what a
// hand-written relay does: one epoll_wait, then the handler of each ready descriptor, which
// reads and writes on the spot. Level-triggered: a handler need not drain what it watches.
//
// Everything but post() and on_loop_thread() is for the loop's own thread: descriptors and
// timers belong to the handlers that run there. post() queues work from any thread.
//
// Runs on: its one thread, named as constructed ("terminals" in the daemon); post(),
// on_loop_thread() and stop() from any other.
#include <sys/epoll.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "util/unique_fd.hpp"

namespace agentbox {

class TerminalLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using Handler = std::function<void(uint32_t events)>;
  using WatchId = uint64_t;
  using TimerId = uint64_t;

  // Starts the thread (named `name` for ps and perf).
  explicit TerminalLoop(const std::string& name);
  ~TerminalLoop();  // stop()
  TerminalLoop(const TerminalLoop&) = delete;
  TerminalLoop& operator=(const TerminalLoop&) = delete;

  // Any thread. Runs fn on the loop, in order; dropped once stop() began.
  void post(std::function<void()> fn);
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // Loop thread only. Calls on_event(epoll events) while fd is ready for `events` (EPOLLIN,
  // EPOLLOUT; errors and hangups always report). The caller keeps fd open until unwatch().
  WatchId watch(int fd, uint32_t events, Handler on_event);
  void modify(WatchId id, uint32_t events);
  // No call for id starts after this (from its own handler too).
  void unwatch(WatchId id);

  // Loop thread only. fn once, at `at` or a little after; cancel() before it ran: never.
  TimerId at(Clock::time_point at, std::function<void()> fn);
  TimerId after(Clock::duration d, std::function<void()> fn) { return at(Clock::now() + d, std::move(fn)); }
  void cancel(TimerId id);

  // Stops and joins the thread (not from it); handlers and timers still there are dropped
  // unrun, and what they own with them. Idempotent.
  void stop();

 private:
  struct Watch {
    int fd = -1;
    std::shared_ptr<Handler> handler;  // held during a call, so unwatch() from it is safe
  };

  void run();
  void wake();  // the loop's epoll_wait returns
  void run_posted();
  void run_due_timers();
  void arm_timer();  // the timerfd at the earliest deadline (or disarmed), when that changed

  // The timers wake the loop through a timerfd, armed only when the earliest deadline changes,
  // so epoll_wait waits without a timeout: no kernel timer is set and cancelled per wake-up
  // (per keystroke), which a VM's timer emulation makes dear.
  const std::string name_;  // the thread's, and in reports of what a handler let escape
  UniqueFd epoll_, wake_, timer_;
  Clock::time_point armed_ = Clock::time_point::max();  // max: disarmed
  std::thread thread_;

  std::mutex mu_;  // guards posted_ and stopping_
  std::vector<std::function<void()>> posted_;
  bool stopping_ = false;

  // The loop thread only.
  std::unordered_map<WatchId, Watch> watches_;
  WatchId next_watch_ = 1;  // 0: the wake-up eventfd
  std::multimap<Clock::time_point, TimerId> deadlines_;
  std::unordered_map<TimerId, std::pair<Clock::time_point, std::function<void()>>> timers_;
  TimerId next_timer_ = 1;
};

}  // namespace agentbox
