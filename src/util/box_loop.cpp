#include "util/box_loop.hpp"

#include <algorithm>
#include <thread>

namespace agentbox {

BoxLoop::BoxLoop(unsigned threads) {
  const unsigned n = threads ? threads : std::max(2u, std::thread::hardware_concurrency());
  threads_.emplace(io_, n, "box-loop");
}

BoxLoop::~BoxLoop() { stop(); }

void BoxLoop::stop() {
  // Whatever is still pending (a timer, a wait on a socket) belongs to components that were
  // shut down first; their handlers are dropped with the io_context.
  if (threads_) threads_->stop();
}

}  // namespace agentbox
