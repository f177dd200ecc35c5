#pragma once
// The daemon's box loop (DESIGN §3, §5): one asio io_context run by a few threads, on which
// every box's owner and every process's output, long-polls and timers live, each on a strand
// of its own account, so one account's work never runs on two threads at once and never holds
// every thread. Handlers must not block; blocking work goes to a pool (launches, file I/O).
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <optional>
#include <thread>
#include <vector>

namespace agentbox {

class BoxLoop {
 public:
  // threads: 0 = one per core, at least two (a strand busy with one account's flood of output
  // then never holds the only thread).
  explicit BoxLoop(unsigned threads = 0);
  ~BoxLoop();  // stop()
  BoxLoop(const BoxLoop&) = delete;
  BoxLoop& operator=(const BoxLoop&) = delete;

  boost::asio::io_context& context() { return io_; }
  // Stops the threads once each finishes its current handler; what is still queued is dropped.
  // Shut down what runs on the loop first. Idempotent; not from a loop thread.
  void stop();
  bool on_loop_thread() const;

 private:
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
};

}  // namespace agentbox
