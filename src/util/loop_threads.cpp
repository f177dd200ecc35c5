#include "util/loop_threads.hpp"

#include <algorithm>
#include <exception>
#include <stdexcept>

#include "util/thread_name.hpp"
#include "util/unhandled.hpp"

namespace agentbox {

LoopThreads::LoopThreads(boost::asio::io_context& io, unsigned threads, std::string name)
    : io_(io), name_(std::move(name)) {
  work_.emplace(io_.get_executor());
  threads = std::max(threads, 1u);
  threads_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i)
    threads_.emplace_back([this] {
      name_this_thread(name_);
      for (;;) {
        try {
          io_.run();
          return;
        } catch (...) {
          // Handlers catch their own; one that did not must not take the loop down.
          report_unhandled(name_, std::current_exception());
        }
      }
    });
}

LoopThreads::~LoopThreads() { stop(); }

void LoopThreads::stop() {
  if (on_loop_thread()) throw std::logic_error(name_ + ": stop() called from one of its own threads");
  work_.reset();
  io_.stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

bool LoopThreads::on_loop_thread() const {
  const auto self = std::this_thread::get_id();
  return std::any_of(threads_.begin(), threads_.end(), [&](const std::thread& t) { return t.get_id() == self; });
}

}  // namespace agentbox
