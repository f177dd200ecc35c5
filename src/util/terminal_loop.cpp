#include "util/terminal_loop.hpp"

#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "util/error.hpp"
#include "util/log.hpp"
#include "util/thread_name.hpp"
#include "util/unhandled.hpp"

namespace agentbox {

namespace {
constexpr int kMaxEvents = 64;
constexpr TerminalLoop::WatchId kWakeId = 0;
constexpr TerminalLoop::WatchId kTimerId = ~TerminalLoop::WatchId{0};
}  // namespace

TerminalLoop::TerminalLoop(const std::string& name)
    : name_(name),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      timer_(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) {
  if (!epoll_) throw sys_error("epoll_create1");
  if (!wake_) throw sys_error("eventfd");
  if (!timer_) throw sys_error("timerfd_create");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  check(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev), "epoll_ctl(ADD, eventfd)");
  ev.data.u64 = kTimerId;
  check(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, timer_.get(), &ev), "epoll_ctl(ADD, timerfd)");
  thread_ = std::thread([this, name] {
    name_this_thread(name);
    run();
  });
}

TerminalLoop::~TerminalLoop() { stop(); }

void TerminalLoop::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
  // What handlers and timers own goes now, on this thread (their loop is gone).
  watches_.clear();
  timers_.clear();
  deadlines_.clear();
  std::lock_guard lock(mu_);
  posted_.clear();
}

void TerminalLoop::post(std::function<void()> fn) {
  bool first;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    first = posted_.empty();
    posted_.push_back(std::move(fn));
  }
  if (first) wake();  // one wake-up per batch: the loop takes all that is queued at once
}

void TerminalLoop::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

TerminalLoop::WatchId TerminalLoop::watch(int fd, uint32_t events, Handler on_event) {
  const WatchId id = next_watch_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  check(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev), "epoll_ctl(ADD)");
  watches_[id] = Watch{fd, std::make_shared<Handler>(std::move(on_event))};
  return id;
}

void TerminalLoop::modify(WatchId id, uint32_t events) {
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  check(::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, it->second.fd, &ev), "epoll_ctl(MOD)");
}

void TerminalLoop::unwatch(WatchId id) {
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd, nullptr);
  watches_.erase(it);
}

TerminalLoop::TimerId TerminalLoop::at(Clock::time_point when, std::function<void()> fn) {
  const TimerId id = next_timer_++;
  deadlines_.emplace(when, id);
  timers_.emplace(id, std::make_pair(when, std::move(fn)));
  return id;
}

void TerminalLoop::cancel(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  auto [first, last] = deadlines_.equal_range(it->second.first);
  for (auto d = first; d != last; ++d)
    if (d->second == id) {
      deadlines_.erase(d);
      break;
    }
  timers_.erase(it);
}

void TerminalLoop::arm_timer() {
  const Clock::time_point next = deadlines_.empty() ? Clock::time_point::max() : deadlines_.begin()->first;
  if (next == armed_) return;
  itimerspec when{};  // all zero: disarmed
  if (next != Clock::time_point::max()) {
    // steady_clock is CLOCK_MONOTONIC; a deadline already past (or at 0) fires at once.
    const auto since_boot = std::chrono::duration_cast<std::chrono::nanoseconds>(next.time_since_epoch());
    const int64_t ns = std::max<int64_t>(1, since_boot.count());
    when.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    when.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
  if (::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &when, nullptr) != 0) {
    log::error(name_, "timerfd_settime: {}", std::strerror(errno));
    return;  // tried again on the next pass
  }
  armed_ = next;
}

void TerminalLoop::run_due_timers() {
  uint64_t expirations;
  [[maybe_unused]] ssize_t n = ::read(timer_.get(), &expirations, sizeof expirations);
  armed_ = Clock::time_point::max();  // one-shot: it fired
  const auto now = Clock::now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const TimerId id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    auto fn = std::move(it->second.second);
    timers_.erase(it);
    fn();
  }
}

void TerminalLoop::run_posted() {
  uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(wake_.get(), &count, sizeof count);
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

void TerminalLoop::run() {
  epoll_event events[kMaxEvents];
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    arm_timer();
    const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, -1);
    if (n < 0 && errno != EINTR) {
      log::error(name_, "epoll_wait: {}; the loop stops", std::strerror(errno));
      return;
    }
    try {
      for (int i = 0; i < n; ++i) {
        // Copied out: epoll_event is packed on x86-64, its u64 not aligned for a reference.
        const WatchId id = events[i].data.u64;
        const uint32_t ready = events[i].events;
        if (id == kWakeId) {
          run_posted();
          continue;
        }
        if (id == kTimerId) {
          run_due_timers();
          continue;
        }
        auto it = watches_.find(id);
        if (it == watches_.end()) continue;  // unwatched by an earlier handler of this batch
        std::shared_ptr<Handler> handler = it->second.handler;
        (*handler)(ready);
      }
    } catch (...) {
      // Handlers catch their own; one that did not must not take the loop down.
      report_unhandled(name_, std::current_exception());
    }
  }
}

}  // namespace agentbox
