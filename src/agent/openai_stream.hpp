#pragma once
// Renders a Claude Code run (the parser's events) as an OpenAI chat completion, for
// `POST /v1/chat/completions` with model `claude-code`: streamed as `chat.completion.chunk`
// objects, and accumulated into one `chat.completion` for a non-streaming request.
//
//   OpenAiStream render("claude-code", "chatcmpl-...", unix_time);
//   parser.feed(bytes, [&](const Event& e) { for (auto& c : render.on(e)) send(sse::json_data(c)); });
//   ... at the CLI's exit:
//   for (auto& c : render.finish(run_end, artifact_links)) send(sse::json_data(c));
//   send(sse::done());              // or, not streaming: answer render.completion()
//
// What goes where, in the order it happens:
//   text      -> delta.content, as the partial stream_events bring it; from the `assistant`
//                message only what the partials did not already bring (none without
//                --include-partial-messages, all of a synthetic error message)
//   thinking  -> delta.reasoning_content, the same way
//   tool call -> once its result arrives, one `<details type="tool_calls">` block in the content
//                (tool_call_block.hpp), never `tool_calls` (Open WebUI would run those itself)
//   result    -> the final chunk's finish_reason and usage; an error result whose text the
//                content does not already show becomes a readable paragraph
//   no result -> finish() says how the CLI ended (exit code, signal, interruption) and shows its
//                last non-JSON output and stderr, so an answer is never just cut off
// Events from subagents (parent_tool_use_id set) are not shown: the Task tool's result carries
// what the subagent found. Independent of Asio and of the box.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/run_end.hpp"
#include "agent/stream_json_events.hpp"

namespace agentbox::agent {

class OpenAiStream {
 public:
  struct Options {
    size_t max_tool_result_bytes = size_t{32} << 10;  // a longer tool result is cut in its block
    size_t kept_diagnostics = 10;                     // non-JSON lines kept for finish()
    size_t max_stderr_bytes = 4096;                   // of RunEnd::stderr_tail, the end is shown
  };

  // model: the name the client asked for; id: the completion id ("chatcmpl-..."); created: unix
  // seconds. All three are repeated in every chunk, as OpenAI does.
  OpenAiStream(std::string model, std::string id, int64_t created, Options options);
  OpenAiStream(std::string model, std::string id, int64_t created)
      : OpenAiStream(std::move(model), std::move(id), created, Options{}) {}

  // The chunks one event adds (often none). Nothing after finish().
  std::vector<nlohmann::json> on(const Event& event);
  // The last chunks: tool calls left without a result, how the run ended when it gave no result,
  // then `trailer` (e.g. links to the files the turn made) as its own paragraph, then the chunk
  // with finish_reason and usage. Once only; later calls return nothing.
  std::vector<nlohmann::json> finish(const RunEnd& end, std::string_view trailer = {});

  // The whole answer as one `chat.completion` object (complete after finish()).
  nlohmann::json completion() const;

  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  // The Claude session, from system/init or the result: what a later turn resumes.
  const std::string& session_id() const { return session_id_; }
  const std::optional<RunResult>& result() const { return result_; }
  bool finished() const { return finished_; }
  // "stop", or "length" when the run stopped at its turn limit.
  std::string finish_reason() const;
  // OpenAI usage {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details}: the
  // result's counts, or what the partial stream reported when there was no result.
  nlohmann::json usage() const;

 private:
  // A text or thinking block streamed from partial events, until its assistant message arrives.
  struct StreamedBlock {
    std::string message_id;
    uint64_t index = 0;
    bool thinking = false;
    std::string text;
    bool matched = false;
  };
  struct PendingTool {
    std::string name;
    nlohmann::json input;
  };
  using Chunks = std::vector<nlohmann::json>;

  void on_stream_event(const StreamEvent& ev, Chunks& out);
  void on_assistant(const AssistantMessage& msg, Chunks& out);
  void on_user(const UserMessage& msg, Chunks& out);
  void on_result(const RunResult& result, Chunks& out);
  // The text of an assistant block that its partials have not shown yet.
  std::string unstreamed_part(const std::string& message_id, bool thinking, const std::string& text);
  void add_content(std::string_view text, Chunks& out);
  void add_reasoning(std::string_view text, Chunks& out);
  void add_paragraph(std::string_view text, Chunks& out);  // separated from what precedes by a blank line
  void add_tool_block(const std::string& id, const std::string& name, const nlohmann::json& input,
                      std::string_view result, Chunks& out);
  nlohmann::json chunk(nlohmann::json delta, const nlohmann::json& finish_reason = nullptr);

  std::string model_, id_;
  int64_t created_;
  Options options_;

  bool role_sent_ = false;
  bool finished_ = false;
  std::string content_, reasoning_;
  std::string session_id_;
  std::optional<RunResult> result_;

  std::string partial_message_id_;            // the message the partial events are about
  std::deque<StreamedBlock> streamed_;        // oldest first; matched ones leave from the front
  std::map<std::string, PendingTool> tools_;  // tool calls waiting for their result, by id
  std::vector<std::string> tool_order_;       // their ids in call order (for finish())
  std::deque<std::string> diagnostics_;       // the last non-JSON lines
  TokenUsage partial_usage_;                  // from message_start/message_delta, finished messages
  uint64_t partial_output_ = 0;               // output tokens of the message being streamed
};

}  // namespace agentbox::agent
