#pragma once
// The daemon's box loop (DESIGN §3, §5): one asio io_context run by a few threads, on which
// every box's owner and every process's output, long-polls and timers live, each on its
// account's strand (strand_of(): one per account, shared by BoxManager and ProcessTable), so
// one account's work never runs on two threads at once and never holds every thread. The
// egress proxy and the model gateway run here too (a strand per connection). Handlers must not
// block; blocking work goes to a pool (launches, file I/O, name lookups).
//
// Runs on: threads named "box-loop" (util/loop_threads.hpp); construct and stop() elsewhere.
#include <boost/asio/io_context.hpp>

#include <memory>
#include <optional>
#include <string>

#include "util/account_strands.hpp"
#include "util/loop_threads.hpp"

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
  // The account's strand (util/account_strands.hpp).
  std::shared_ptr<const LoopStrand> strand_of(const std::string& account) { return strands_.of(account); }
  AccountStrands& strands() { return strands_; }
  // Stops the threads once each finishes its current handler; what is still queued is dropped.
  // Shut down what runs on the loop first. Idempotent; not from a loop thread.
  void stop();
  bool on_loop_thread() const { return threads_ && threads_->on_loop_thread(); }

 private:
  boost::asio::io_context io_;
  AccountStrands strands_{io_};
  std::optional<LoopThreads> threads_;
};

}  // namespace agentbox
