#pragma once
// LoopThreads: the one way the daemon runs an asio io_context on threads of its own (the box
// loop, util/box_loop.hpp; the API's, http/server.hpp). Each thread is named (ps -L) and runs
// io.run() until stop(); an exception a handler let escape is reported with the loop's name
// (util/unhandled.hpp) and the thread runs on. A work guard keeps io.run() from returning
// while the loop is idle.
//
// Runs on: its own threads; construct and stop() from another thread.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace agentbox {

class LoopThreads {
 public:
  // Starts `threads` threads (at least one), each named `name`, running io.
  LoopThreads(boost::asio::io_context& io, unsigned threads, std::string name);
  ~LoopThreads();  // stop()
  LoopThreads(const LoopThreads&) = delete;
  LoopThreads& operator=(const LoopThreads&) = delete;

  // Stops io once each thread finishes its current handler and joins them; what is still
  // queued is left in io (dropped with it). Idempotent; not from one of these threads.
  void stop();
  bool on_loop_thread() const;
  unsigned size() const { return static_cast<unsigned>(threads_.size()); }

 private:
  boost::asio::io_context& io_;
  const std::string name_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
};

}  // namespace agentbox
