#pragma once
// The last catch of a loop or a guard: an exception no handler caught is reported as an error
// line of the log (util/log.hpp), its component where it was caught ("[box-loop] [error]
// unhandled exception: ..."), and the loop goes on. Never silent: a handler that throws is a
// bug to find, not to swallow.
#include <exception>
#include <string_view>
#include <utility>

namespace agentbox {

void report_unhandled(std::string_view where, std::exception_ptr error) noexcept;

// Calls fn (when set) with args; what it throws is reported as above, naming where, and goes no
// further: a caller's callback must not take the loop that calls it down.
template <class Fn, class... Args>
void call_reporting(std::string_view where, Fn& fn, Args&&... args) noexcept {
  try {
    if (fn) fn(std::forward<Args>(args)...);
  } catch (...) {
    report_unhandled(where, std::current_exception());
  }
}

}  // namespace agentbox
