#include "net/deadline.hpp"

namespace agentbox::net {

void Deadline::watch(std::weak_ptr<void> owner, std::function<void()> on_expiry) {
  owner_ = std::move(owner);
  on_expiry_ = std::move(on_expiry);
}

void Deadline::expires_after(Clock::duration d) {
  deadline_ = Clock::now() + d;
  expired_ = false;
  if (deadline_ < waiting_for_) arm(deadline_);  // sooner than the wait pending (or none)
}

void Deadline::expires_never() {
  deadline_ = Clock::time_point::max();
  expired_ = false;
}

void Deadline::cancel() {
  expires_never();
  waiting_for_ = Clock::time_point::max();
  timer_.cancel();
}

void Deadline::arm(Clock::time_point at) {
  waiting_for_ = at;
  timer_.expires_at(at);  // a wait pending ends with operation_aborted, and is ignored
  timer_.async_wait([this, owner = owner_](boost::system::error_code ec) {
    if (ec == boost::asio::error::operation_aborted) return;
    if (auto alive = owner.lock()) on_timer();
  });
}

void Deadline::on_timer() {
  waiting_for_ = Clock::time_point::max();
  if (deadline_ == Clock::time_point::max()) return;    // no deadline now: wait for the next one
  if (Clock::now() < deadline_) return arm(deadline_);  // moved later meanwhile
  expired_ = true;
  if (on_expiry_) on_expiry_();
}

}  // namespace agentbox::net
