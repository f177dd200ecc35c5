#include "daemon/readiness.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "util/unique_fd.hpp"

namespace agentbox::daemon {

namespace {
// The box loop may be busy for a moment; this long without running a posted job is not that.
constexpr std::chrono::seconds kBoxLoopSilence{5};
constexpr std::chrono::seconds kRecheckAfter{1};
}  // namespace

Readiness::Readiness(std::function<void()> store, std::string state_dir, BoxLoop& loop)
    : store_(std::move(store)), state_dir_(std::move(state_dir)), loop_(loop) {}

std::string Readiness::failing() {
  std::lock_guard lock(mu_);
  const Clock::time_point now = Clock::now();
  if (checked_ != Clock::time_point{} && now - checked_ < kRecheckAfter) return last_;
  checked_ = now;
  last_ = check();
  return last_;
}

std::string Readiness::check() {
  try {
    store_();
  } catch (const std::exception& e) {
    return fmt::format("store: {}", e.what());
  }
  // A file made and removed where the daemon keeps its state: a full or read-only disk shows.
  const std::string probe = fmt::format("{}/.ready-probe-{}", state_dir_, ::getpid());
  {
    UniqueFd fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return fmt::format("state_dir: cannot create a file in {}: {}", state_dir_, std::strerror(errno));
    if (::write(fd.get(), "ready\n", 6) != 6) {
      const int e = errno;
      ::unlink(probe.c_str());
      return fmt::format("state_dir: cannot write a file in {}: {}", state_dir_, std::strerror(e));
    }
  }
  if (::unlink(probe.c_str()) != 0)
    return fmt::format("state_dir: cannot remove a file in {}: {}", state_dir_, std::strerror(errno));
  return check_box_loop(Clock::now());
}

std::string Readiness::check_box_loop(Clock::time_point now) {
  const bool waiting = posted_ != Clock::time_point{} && answered_->load() < posted_.time_since_epoch().count();
  if (waiting) {
    if (now - posted_ > kBoxLoopSilence)
      return fmt::format("boxes: the box loop has not run a job for {} s",
                         std::chrono::duration_cast<std::chrono::seconds>(now - posted_).count());
    return {};  // the last heartbeat is on its way
  }
  posted_ = now;
  boost::asio::post(loop_.context(),
                    [answered = answered_] { answered->store(Clock::now().time_since_epoch().count()); });
  return {};
}

}  // namespace agentbox::daemon
