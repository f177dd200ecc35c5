#include "agent/run_end.hpp"

#include <fmt/format.h>

#include <cstring>

namespace agentbox::agent {

std::string describe(const RunEnd& end) {
  if (end.interrupted) return "interrupted";
  if (end.signal) {
    const char* abbrev = sigabbrev_np(*end.signal);
    return abbrev ? fmt::format("signal SIG{}", abbrev) : fmt::format("signal {}", *end.signal);
  }
  if (end.exit_code) return fmt::format("exit code {}", *end.exit_code);
  return "unknown";
}

}  // namespace agentbox::agent
