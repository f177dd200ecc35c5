#pragma once
// ClaudeRunner: one turn of Claude Code in a user's box (DESIGN §7). The real CLI runs as a
// command of the account's own (exec/process_table.hpp: it shows in the user's GET /execute,
// its output is logged and capped like any command's), without a terminal:
//   claude -p --output-format stream-json --verbose --include-partial-messages
//          [--resume ID] [--model M] [--max-turns N] [--allowedTools ...]
//          [--append-system-prompt TEXT] ...
// in the chat's directory, with the prompt on its stdin (no argv size limit, nothing of it in
// a process listing). Its stdout (stream-json lines) is handed on as it arrives; the caller
// parses it (agent/stream_json_parser.hpp). Stopping a run is Ctrl-C first (SIGINT: the CLI
// ends the turn and keeps its session resumable), then TERM and KILL if it does not exit.
// A chat's turns run on a CLI that stays between them (agent/warm_clis.hpp) when warm CLIs are
// enabled: the same flags plus --input-format stream-json, each prompt one line on its stdin.
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "box/box_spec.hpp"
#include "exec/process_table.hpp"

namespace agentbox::agent {

struct ClaudeTurn {
  BoxSpec box;                                        // the caller's box (box.name: the account)
  std::string cwd;                                    // box path of the chat's directory; exists
  std::string prompt;                                 // written to the CLI's stdin
  std::optional<std::string> resume;                  // Claude session to continue
  std::string append_system_prompt;                   // describes the box, plus the request's system messages
  std::string model;                                  // empty: the CLI's default
  int max_turns = 0;                                  // 0: the CLI's default
  std::vector<std::string> allowed_tools;             // empty: all; else only these (the rest is refused)
  std::string permission_mode = "bypassPermissions";  // the model's approval mode (acceptEdits, plan); bypass
                                                      // only without allowed_tools (a list is a limit)
  std::vector<std::string> extra_args;                // more CLI flags from the configuration
  std::map<std::string, std::string> env;             // added to the box's environment (CLAUDE_CODE_MAX_RETRIES)
  std::string warm_key;  // "": a run of its own; else the chat (account and chat) whose warm CLI may run it
};

// The CLI's command line for a turn (argv[0] "claude", found on the box's PATH).
std::vector<std::string> claude_argv(const ClaudeTurn& turn);

struct ClaudeExit {
  std::exception_ptr start_error;  // it never ran (the box could not start it)
  std::optional<int> exit_code;    // done: its status (-signal when a signal ended it)
  bool killed = false;             // stopped by interrupt() or the timeout
  std::string stderr_tail;         // the last of what it wrote to stderr, for diagnostics
  bool warm_gone = false;          // its chat's warm CLI ended before it answered: run it again (cold)
  // Ask mode: the turn ended on a tool call that waits for the user's approval (the chat's next
  // message answers it). tool: its name; input: its arguments (JSON text).
  struct Question {
    std::string tool;
    std::string input;
  };
  std::optional<Question> question;
};

// An ask-mode decision, as the warm CLI sent it to Claude Code ("yes", "always", "no", "expired").
struct ApprovalDecision {
  std::string tool;
  std::string input;  // JSON text
  std::string decision;
  std::string reason;  // the user's words when denied
};

// Called on a loop thread, never two at once: stdout bytes in order as they come, then
// exited() once, last.
struct ClaudeSink {
  std::function<void(std::string_view stdout_bytes)> output;
  std::function<void(const ClaudeExit&)> exited;
  // Ask mode: a question this turn's message answered, or one this turn asked that expired.
  std::function<void(const ApprovalDecision&)> decided;
};

struct ClaudeRunnerOptions {
  std::chrono::milliseconds interrupt_grace{5000};                              // after SIGINT, then TERM (then KILL)
  std::optional<std::chrono::milliseconds> timeout = std::chrono::minutes(30);  // a turn at most
  size_t stderr_tail_bytes = 8 << 10;
};

struct WarmOptions;
class WarmClis;

class ClaudeRun {
 public:
  virtual ~ClaudeRun() = default;
  // Stops the turn (the client left): SIGINT now, TERM after interrupt_grace if it still runs.
  // Idempotent; the sink's exited() still comes.
  virtual void interrupt() = 0;
  // The process id in the account's /execute table (empty until it started).
  virtual std::string process_id() const = 0;
};

class ClaudeRunner {
 public:
  // warm: how long an idle chat CLI stays and how many an account keeps (agent/warm_clis.hpp).
  ClaudeRunner(boost::asio::io_context& loop, exec::ProcessTable& table, ClaudeRunnerOptions options = {});
  ClaudeRunner(boost::asio::io_context& loop, exec::ProcessTable& table, ClaudeRunnerOptions options,
               const WarmOptions& warm);
  ~ClaudeRunner();

  // A turn with a warm_key runs on its chat's warm CLI (started for it when there is none);
  // one without runs a CLI of its own that ends with the turn.
  std::shared_ptr<ClaudeRun> start(ClaudeTurn turn, ClaudeSink sink);

  // The account's warm CLIs (busy and idle).
  std::size_t warm_count(const std::string& account) const;

 private:
  boost::asio::io_context& loop_;
  exec::ProcessTable& table_;
  ClaudeRunnerOptions options_;
  std::unique_ptr<WarmClis> warm_;
};

}  // namespace agentbox::agent
