#pragma once
// The last catch of a loop or a guard: an exception no handler caught is reported in one line
// on stderr, naming where it was caught ("agentbox: box-loop: unhandled exception: ..."), and
// the loop goes on. Never silent: a handler that throws is a bug to find, not to swallow.
#include <exception>
#include <string_view>

namespace agentbox {

void report_unhandled(std::string_view where, std::exception_ptr error) noexcept;

}  // namespace agentbox
