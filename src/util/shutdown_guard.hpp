#pragma once
// ShutdownGuard: how an object whose handlers sit queued on a loop (ProcessTable on the box
// loop, Terminals on the terminals' loop) is shut down while they do. Each handler runs through
// run(): once close() has been called it is skipped, and close() waits for the ones running.
// What a handler throws is caught here and reported with the guard's name
// (util/unhandled.hpp): it must not take the loop down, and it must not go unseen.
//
// Runs on: run() on any thread, typically the loop's; close() from outside the handlers
// (it waits for them).
#include <exception>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>

#include "util/unhandled.hpp"

namespace agentbox {

class ShutdownGuard {
 public:
  explicit ShutdownGuard(std::string name) : name_(std::move(name)) {}
  ShutdownGuard(const ShutdownGuard&) = delete;
  ShutdownGuard& operator=(const ShutdownGuard&) = delete;

  // Runs fn now, unless closed; false when it was skipped.
  template <class Fn>
  bool run(Fn&& fn) {
    std::shared_lock lock(mu_);
    if (closed_) return false;
    try {
      std::forward<Fn>(fn)();
    } catch (...) {
      report_unhandled(name_, std::current_exception());
    }
    return true;
  }

  // Waits until no run() is inside its fn, and lets none start from then on. Idempotent.
  void close() {
    std::unique_lock lock(mu_);
    closed_ = true;
  }

  bool closed() const {
    std::shared_lock lock(mu_);
    return closed_;
  }

 private:
  const std::string name_;
  mutable std::shared_mutex mu_;  // shared by every run() at work; unique in close()
  bool closed_ = false;           // guarded by mu_
};

}  // namespace agentbox
