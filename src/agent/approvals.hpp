#pragma once
// Ask mode's side of a turn (issue 32): the question a held tool call ends the answer with, and
// the decisions kept with the session, one JSON object a line in <session>.approvals.ndjson
// beside the CLI's transcript (not .jsonl: that names sessions). Pure but for the two that take
// the caller's home, which they read and write through it (never on the loop).
#include <nlohmann/json.hpp>

#include <string>

#include "accounts/directory.hpp"
#include "agent/claude_runner.hpp"

namespace agentbox::agent {

// Markdown: what the call would do (Bash: the command; Edit/Write: the file and a short diff;
// else the input) and what to reply.
std::string approval_question(const ClaudeExit::Question& question);

// The approvals file of the transcript at rel (".../<session>.jsonl", under the home).
std::string approvals_path(const std::string& transcript_rel);

// Appends d (with the time) to the approvals at rel. Throws what the home's writes throw.
void record_approval(const accounts::Caller& caller, const std::string& rel, const ApprovalDecision& d);

// The approvals at rel, oldest first ([] when none): {tool, input, decision, reason, time}.
nlohmann::json read_approvals(const accounts::Caller& caller, const std::string& rel);

}  // namespace agentbox::agent
