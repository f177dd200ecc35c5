#include "box/spawn_failure.hpp"

#include "box/box_error.hpp"
#include "box/spawn_result.hpp"

namespace agentbox {

namespace {
// The host's pool frees as other boxes' terminals and commands end.
constexpr int kHostPtysRetrySeconds = 5;
}  // namespace

std::exception_ptr spawn_failure_error(const protocol::SpawnFailed& failed) {
  switch (failed.cause) {
    case protocol::SpawnFailure::box_ptys: return std::make_exception_ptr(BoxLimitReached(failed.message));
    case protocol::SpawnFailure::host_ptys:
      return std::make_exception_ptr(BoxUnavailable(failed.message, kHostPtysRetrySeconds));
    case protocol::SpawnFailure::command: break;
  }
  return std::make_exception_ptr(SpawnError(failed.message, failed.err));
}

}  // namespace agentbox
