#include "util/box_loop.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <exception>

namespace agentbox {

BoxLoop::BoxLoop(unsigned threads) {
  const unsigned n = threads ? threads : std::max(2u, std::thread::hardware_concurrency());
  work_.emplace(io_.get_executor());
  for (unsigned i = 0; i < n; ++i)
    threads_.emplace_back([this] {
      // A write to a pipe whose reader is gone (a command's stdin) answers EPIPE, instead of
      // a SIGPIPE that would end the daemon.
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      ::pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          // Handlers catch their own; one that did not must not take the loop down.
          std::fprintf(stderr, "agentbox: event loop: unhandled exception: %s\n", e.what());
        }
      }
    });
}

BoxLoop::~BoxLoop() { stop(); }

void BoxLoop::stop() {
  // Whatever is still pending (a timer, a wait on a socket) belongs to components that were
  // shut down first; their handlers are dropped with the io_context.
  work_.reset();
  io_.stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

bool BoxLoop::on_loop_thread() const {
  for (const auto& t : threads_)
    if (t.get_id() == std::this_thread::get_id()) return true;
  return false;
}

}  // namespace agentbox
