#pragma once
// The events of Claude Code's `--output-format stream-json --verbose` output, one per line, as
// typed values (what the parser hands out). Shapes as recorded from CLI 2.1.197
// (tests/agent_fixtures/): a line is a JSON object whose "type" is
//   system      subtype "init" (session_id, model, cwd, tools), "api_retry", "status", ...
//   stream_event  with --include-partial-messages: one Messages API event ("event": message_start,
//               content_block_start/delta/stop, message_delta, message_stop)
//   assistant   a finished content block (the CLI sends one message per block): text, thinking,
//               tool_use {id, name, input}; "error" set on a synthetic message carrying an API error
//   user        tool results {tool_use_id, content: string or [{type:"text",text}], is_error}
//   result      the end of the turn: subtype, is_error, result text, cost, usage, turns
// Anything else (a new type, a system subtype we do not use) is `OtherEvent`; a line that is not
// a JSON object is a `Diagnostic`. Unknown keys are ignored everywhere.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace agentbox::agent {

// Token counts as the Messages API reports them (cache counts are not part of input_tokens).
struct TokenUsage {
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  uint64_t cache_creation_input_tokens = 0;
  uint64_t cache_read_input_tokens = 0;
  bool operator==(const TokenUsage&) const = default;
};

// A line of stdout that is not a JSON object (a warning the CLI printed, a crash trace).
struct Diagnostic {
  std::string text;
};

// A JSON object of a type (or system subtype) this code does not interpret.
struct OtherEvent {
  std::string type;
  std::string subtype;
};

// system/init: the first line of every run.
struct SystemInit {
  std::string session_id;
  std::string model;
  std::string cwd;
  std::string permission_mode;
  std::string version;  // claude_code_version
  std::vector<std::string> tools;
};

// system/api_retry: the upstream failed and the CLI will try again after a delay.
struct ApiRetry {
  uint64_t attempt = 0;
  uint64_t max_retries = 0;
  std::optional<int> error_status;  // HTTP status, absent for a connection error
  std::string error;                // e.g. "overloaded"
  double retry_delay_ms = 0;
};

// stream_event: one Messages API streaming event, flattened to what rendering needs.
struct StreamEvent {
  enum class Kind {
    message_start,
    content_block_start,
    content_block_delta,
    content_block_stop,
    message_delta,
    message_stop,
    other
  };
  // A content block's type (content_block_start) and a delta's type (content_block_delta).
  enum class Block { text, thinking, tool_use, other };
  enum class Delta { text, thinking, input_json, signature, other };

  Kind kind = Kind::other;
  std::string parent_tool_use_id;   // non-empty inside a subagent (Task tool)
  uint64_t index = 0;               // content block index within the message
  std::string message_id;           // message_start
  Block block = Block::other;       // content_block_start
  std::string tool_id, tool_name;   // content_block_start of a tool_use
  Delta delta = Delta::other;       // content_block_delta
  std::string text;                 // text, thinking or partial JSON of a delta; text of a start
  std::string stop_reason;          // message_delta
  std::optional<TokenUsage> usage;  // message_start (input side), message_delta (output so far)
};

// One block of an assistant message.
struct ContentBlock {
  enum class Type { text, thinking, tool_use, other };
  Type type = Type::other;
  std::string text;                // text, or the thinking
  std::string tool_id, tool_name;  // tool_use
  nlohmann::json input;            // tool_use arguments (an object)
};

struct AssistantMessage {
  std::string message_id;
  std::string model;               // "<synthetic>" for an error message the CLI made up
  std::string parent_tool_use_id;  // non-empty inside a subagent
  std::string error;               // set on a synthetic error message ("server_error", ...)
  std::vector<ContentBlock> blocks;
};

struct ToolResult {
  std::string tool_use_id;
  std::string content;  // a string result, or the text parts of an array result joined by '\n'
  bool is_error = false;
};

struct UserMessage {
  std::string parent_tool_use_id;
  std::vector<ToolResult> tool_results;
  std::string text;  // text parts of a user message that is not (only) tool results
};

// result: the last line of a run that ended normally, successful or not.
struct RunResult {
  std::string subtype;  // success, error_max_turns, error_during_execution, error_max_budget_usd, ...
  bool is_error = false;
  std::string result;  // the final text (absent on some error subtypes)
  std::string session_id;
  std::string stop_reason;
  std::string terminal_reason;  // completed, max_turns, ...
  std::optional<int> api_error_status;
  std::vector<std::string> errors;  // error messages some error subtypes carry
  double total_cost_usd = 0;
  TokenUsage usage;
  uint64_t num_turns = 0;
  uint64_t duration_ms = 0;
  uint64_t duration_api_ms = 0;
  uint64_t permission_denials = 0;  // tool calls the permission mode refused
};

using EventBody =
    std::variant<Diagnostic, OtherEvent, SystemInit, ApiRetry, StreamEvent, AssistantMessage, UserMessage, RunResult>;

struct Event {
  std::string_view line;  // the line as received, without its end; valid during the callback
  EventBody body;
};

}  // namespace agentbox::agent
