#pragma once
// Waits for a condition something else makes true (a thread, the kernel freeing a device), for
// at most `within`, asking every 10 ms; true as soon as it holds.
#include <chrono>
#include <functional>
#include <thread>

namespace agentbox::testing {

inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds within = std::chrono::seconds(10)) {
  for (const auto end = std::chrono::steady_clock::now() + within; std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(std::chrono::milliseconds(10)))
    if (done()) return true;
  return done();
}

}  // namespace agentbox::testing
