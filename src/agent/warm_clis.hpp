#pragma once
// WarmClis: a chat's Claude Code CLI kept alive between its turns (issue 32), so that a follow-up
// skips the CLI's start. A warm CLI runs `claude -p --input-format stream-json ...` as a command of
// the account (exec/process_table.hpp) with its stdin left open: each turn is one user line
// written to it, and the turn is over at the CLI's `result` line for it (the process stays).
//
// A turn finds its chat's CLI by key (account and chat) and reuses it when it is idle and was
// started with the same flags; otherwise a new one starts (resuming the chat's session as a cold
// turn would) and stays warm after the turn. Nothing of a session lives only here: the CLI writes
// its transcript as it goes, so a CLI that is gone (idle end, cap, box stop, crash, daemon
// restart) only means the next turn starts one with --resume. A reused CLI found gone before it
// answered anything reports ClaudeExit::warm_gone: the caller runs the turn again, cold.
//
// Ends: an idle CLI after `idle` (end of input: it exits cleanly); the least recently used idle
// CLI of an account when it has more than `per_account`; a turn that outlives the run timeout
// (killed). A turn whose client left is interrupted through the control protocol (the CLI ends
// the turn with a result and stays); if no result comes within interrupt_grace, the CLI is
// killed.
//
// Ask mode (--permission-prompt-tool stdio): a can_use_tool control request ends the turn with a
// ClaudeExit::question and the CLI waits, holding the call. The chat's next turn on it is the
// answer, not a user line: "yes" allows the call once, "always" allows the tool for the session,
// anything else denies it with the text as the reason; the turn then relays the rest of Claude
// Code's answer. Unanswered after approval_timeout, the call is denied and the turn stopped.
//
// Runs on: any thread for start() and the handles' interrupt(); the read chain, timers and the
// sinks on the loop. One mutex guards the pool and each CLI has one of its own (never both held
// while calling out).
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "agent/claude_runner.hpp"
#include "exec/process_table.hpp"

namespace agentbox::agent {

struct WarmOptions {
  std::chrono::seconds idle{300};              // an idle warm CLI ends after this ([agent] warm_idle)
  std::size_t per_account = 2;                 // warm CLIs an account keeps at most ([agent] warm_per_account)
  std::chrono::seconds approval_timeout{600};  // an ask-mode question is denied after ([agent] approval_timeout)
};

class WarmClis {
 public:
  WarmClis(boost::asio::io_context& loop, exec::ProcessTable& table, const ClaudeRunnerOptions& run, WarmOptions warm);
  ~WarmClis();
  WarmClis(const WarmClis&) = delete;
  WarmClis& operator=(const WarmClis&) = delete;

  bool enabled() const { return warm_.per_account > 0 && warm_.idle.count() > 0; }

  // Runs a turn of chat `key` on its warm CLI, or on a new one started from `cold` (its argv
  // already in stream-json input mode, stdin left open). `signature`: what must match for a
  // warm CLI to serve it (its flags). `line`: the user message as a stream-json input line.
  std::shared_ptr<ClaudeRun> start(const std::string& key, const std::string& signature, exec::StartRequest cold,
                                   std::string line, ClaudeSink sink);

  // The account's CLIs (busy and idle), for tests and logs.
  std::size_t count(const std::string& account) const;

  struct Impl;

 private:
  const WarmOptions warm_;
  std::shared_ptr<Impl> impl_;
};

// The user line a stream-json input CLI reads for prompt.
std::string stream_json_user_line(const std::string& prompt);

}  // namespace agentbox::agent
