#pragma once
// How a `claude` run ended, as its runner saw the process: what the renderers need to say
// something useful when the CLI stopped without a `result` line (crash, kill, cancel).
#include <optional>
#include <string>

namespace agentbox::agent {

struct RunEnd {
  std::optional<int> exit_code;  // the CLI's exit status, when it exited
  std::optional<int> signal;     // the signal that ended it, when it was killed
  bool interrupted = false;      // stopped on purpose (the client left, a cancel, a deadline)
  std::string stderr_tail;       // the last of its stderr (bounded by the runner), may be empty
  bool asking = false;           // ask mode: it waits for the user's approval of a tool call (no result yet)
};

// "exit code 3", "signal SIGKILL", "interrupted", or "unknown" when nothing is known.
std::string describe(const RunEnd& end);

}  // namespace agentbox::agent
