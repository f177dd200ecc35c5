#pragma once
// A socket's deadline for the egress proxy's sessions: one timer for all the successive
// timeouts of a connection (a head to read, an origin to connect, a body to move).
//
// beast::tcp_stream re-arms its timer for every read and write: a cancelled wait run through
// the scheduler and a timerfd_settime each, ~6 per proxied request. Here moving the deadline
// only stores a time; the timer is re-armed when it fires before the deadline (then waits for
// the rest) or when the deadline moves before the time it waits for. A timeout closes nothing
// itself: on_expiry does (the session closes the socket, and its pending operation ends with
// operation_aborted; expired() tells that apart from the peer's doing).
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace agentbox::net {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Deadline(const boost::asio::any_io_executor& ex) : timer_(ex) {}

  // on_expiry runs on the executor when a deadline passes, unless owner is gone by then (the
  // timer's wait never keeps the owner alive, and never touches this after the owner died).
  void watch(std::weak_ptr<void> owner, std::function<void()> on_expiry);

  void expires_after(Clock::duration d);
  void expires_never();
  // expires_never, and the timer's wait ends now: for a socket handed on (a tunnel) or closed.
  void cancel();
  // True from the moment the deadline passed (before on_expiry runs) until it is moved.
  bool expired() const { return expired_; }

 private:
  void arm(Clock::time_point at);
  void on_timer();

  boost::asio::steady_timer timer_;
  std::weak_ptr<void> owner_;
  std::function<void()> on_expiry_;
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point waiting_for_ = Clock::time_point::max();  // max: no wait pending
  bool expired_ = false;
};

}  // namespace agentbox::net
