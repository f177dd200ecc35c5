#include "agent/openai_stream.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "agent/tool_call_block.hpp"
#include "util/utf8.hpp"

namespace agentbox::agent {

namespace {

using nlohmann::json;

// The last max_bytes of text, starting at a character boundary.
std::string_view utf8_suffix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t start = text.size() - max_bytes;
  for (int skip = 0; skip < 3 && start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80;
       ++skip)
    ++start;
  return text.substr(start);
}

// A Markdown code fence longer than any run of backticks in text, so text cannot close it.
std::string fence_for(std::string_view text) {
  size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

std::string code_block(std::string_view text) {
  std::string fence = fence_for(text);
  std::string out = fence;
  out += "text\n";
  out += text;
  if (!text.empty() && text.back() != '\n') out += '\n';
  out += fence;
  return out;
}

// A readable sentence for an error result that carries no text of its own, with the error
// messages the CLI gave (e.g. "Reached maximum number of turns (1)").
std::string describe_error_result(const RunResult& r) {
  std::string text;
  if (r.subtype == "error_max_turns")
    text = "Claude Code stopped: it reached the maximum number of turns.";
  else if (r.subtype == "error_during_execution")
    text = "Claude Code stopped because of an error during execution.";
  else if (r.subtype == "error_max_budget_usd")
    text = "Claude Code stopped: it reached its spending limit.";
  else
    text = fmt::format("Claude Code stopped with an error ({}).", r.subtype.empty() ? "no reason given" : r.subtype);
  for (const std::string& e : r.errors) {
    text += "\n- ";
    text += e;
  }
  return text;
}

}  // namespace

OpenAiStream::OpenAiStream(std::string model, std::string id, int64_t created, Options options)
    : model_(std::move(model)), id_(std::move(id)), created_(created), options_(options) {}

std::vector<json> OpenAiStream::on(const Event& event) {
  Chunks out;
  if (finished_) return out;
  std::visit(
      [&](const auto& body) {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, SystemInit>) {
          if (!body.session_id.empty()) session_id_ = body.session_id;
        } else if constexpr (std::is_same_v<T, StreamEvent>) {
          on_stream_event(body, out);
        } else if constexpr (std::is_same_v<T, AssistantMessage>) {
          on_assistant(body, out);
        } else if constexpr (std::is_same_v<T, UserMessage>) {
          on_user(body, out);
        } else if constexpr (std::is_same_v<T, RunResult>) {
          on_result(body, out);
        } else if constexpr (std::is_same_v<T, Diagnostic>) {
          if (options_.kept_diagnostics == 0) return;
          if (diagnostics_.size() == options_.kept_diagnostics) diagnostics_.pop_front();
          diagnostics_.push_back(body.text);
        }
        // OtherEvent, ApiRetry: nothing to show (the CLI retries on its own; a final failure
        // arrives as a synthetic assistant message and an error result).
      },
      event.body);
  return out;
}

void OpenAiStream::on_stream_event(const StreamEvent& ev, Chunks& out) {
  if (!ev.parent_tool_use_id.empty()) return;
  switch (ev.kind) {
    case StreamEvent::Kind::message_start:
      partial_message_id_ = ev.message_id;
      partial_usage_.output_tokens += partial_output_;  // the previous message's last count
      partial_output_ = 0;
      if (ev.usage) {
        partial_usage_.input_tokens += ev.usage->input_tokens;
        partial_usage_.cache_creation_input_tokens += ev.usage->cache_creation_input_tokens;
        partial_usage_.cache_read_input_tokens += ev.usage->cache_read_input_tokens;
        partial_output_ = ev.usage->output_tokens;
      }
      break;
    case StreamEvent::Kind::message_delta:
      if (ev.usage) partial_output_ = ev.usage->output_tokens;  // cumulative within a message
      break;
    case StreamEvent::Kind::content_block_start:
      if (ev.block != StreamEvent::Block::text && ev.block != StreamEvent::Block::thinking) break;
      streamed_.push_back(
          StreamedBlock{partial_message_id_, ev.index, ev.block == StreamEvent::Block::thinking, {}, false});
      if (!ev.text.empty()) {
        streamed_.back().text = ev.text;
        if (streamed_.back().thinking)
          add_reasoning(ev.text, out);
        else
          add_content(ev.text, out);
      }
      break;
    case StreamEvent::Kind::content_block_delta: {
      if (ev.delta != StreamEvent::Delta::text && ev.delta != StreamEvent::Delta::thinking) break;
      const bool thinking = ev.delta == StreamEvent::Delta::thinking;
      auto it = std::find_if(streamed_.rbegin(), streamed_.rend(), [&](const StreamedBlock& b) {
        return !b.matched && b.message_id == partial_message_id_ && b.index == ev.index && b.thinking == thinking;
      });
      if (it == streamed_.rend()) {  // a delta without its start: track it all the same
        streamed_.push_back(StreamedBlock{partial_message_id_, ev.index, thinking, {}, false});
        it = streamed_.rbegin();
      }
      it->text += ev.text;
      if (thinking)
        add_reasoning(ev.text, out);
      else
        add_content(ev.text, out);
      break;
    }
    default: break;
  }
}

std::string OpenAiStream::unstreamed_part(const std::string& message_id, bool thinking, const std::string& text) {
  auto it = std::find_if(streamed_.begin(), streamed_.end(), [&](const StreamedBlock& b) {
    return !b.matched && b.message_id == message_id && b.thinking == thinking;
  });
  if (it == streamed_.end()) return text;  // never streamed: all of it is new
  it->matched = true;
  std::string already = std::move(it->text);
  it->text.clear();
  while (!streamed_.empty() && streamed_.front().matched) streamed_.pop_front();
  // The partials normally brought all of it; if they stopped early, add what they missed.
  if (text.size() > already.size() && text.compare(0, already.size(), already) == 0) return text.substr(already.size());
  return {};
}

void OpenAiStream::on_assistant(const AssistantMessage& msg, Chunks& out) {
  if (!msg.parent_tool_use_id.empty()) return;
  for (const ContentBlock& block : msg.blocks) {
    switch (block.type) {
      case ContentBlock::Type::text: add_content(unstreamed_part(msg.message_id, false, block.text), out); break;
      case ContentBlock::Type::thinking: add_reasoning(unstreamed_part(msg.message_id, true, block.text), out); break;
      case ContentBlock::Type::tool_use:
        if (!tools_.count(block.tool_id)) tool_order_.push_back(block.tool_id);
        tools_[block.tool_id] = PendingTool{block.tool_name, block.input};
        break;
      case ContentBlock::Type::other: break;
    }
  }
}

void OpenAiStream::on_user(const UserMessage& msg, Chunks& out) {
  if (!msg.parent_tool_use_id.empty()) return;
  for (const ToolResult& r : msg.tool_results) {
    std::string text = r.content;
    if (r.is_error && text.rfind("Error", 0) != 0) text.insert(0, "Error: ");
    auto it = tools_.find(r.tool_use_id);
    if (it == tools_.end()) {
      add_tool_block(r.tool_use_id, "tool", json::object(), text, out);
      continue;
    }
    add_tool_block(r.tool_use_id, it->second.name, it->second.input, text, out);
    tools_.erase(it);
    std::erase(tool_order_, r.tool_use_id);
  }
}

void OpenAiStream::on_result(const RunResult& result, Chunks& out) {
  result_ = result;
  if (!result.session_id.empty()) session_id_ = result.session_id;
  if (!result.is_error) {
    // The answer normally arrived as text already; show the result text if nothing did.
    if (content_.empty() && !result.result.empty()) add_content(result.result, out);
    return;
  }
  if (!result.result.empty()) {
    // An API error arrives twice: as a synthetic assistant message, then as the result text.
    if (content_.find(result.result) == std::string::npos) add_paragraph(result.result, out);
    return;
  }
  add_paragraph(describe_error_result(result), out);
}

std::vector<json> OpenAiStream::finish(const RunEnd& end, std::string_view trailer) {
  Chunks out;
  if (finished_) return out;
  for (const std::string& id : tool_order_) {
    const PendingTool& tool = tools_.at(id);
    add_tool_block(id, tool.name, tool.input,
                   end.asking ? "(waiting for your approval)" : "(no result: the run ended before this tool finished)",
                   out);
  }
  tools_.clear();
  tool_order_.clear();

  if (!result_ && !end.asking) {
    std::string text = end.interrupted
                           ? std::string("The run was interrupted before Claude Code finished its answer.")
                           : fmt::format("Claude Code ended without finishing its answer ({}).", describe(end));
    std::string details;
    for (const std::string& line : diagnostics_) {
      details += line;
      details += '\n';
    }
    details += utf8_suffix(end.stderr_tail, options_.max_stderr_bytes);
    if (!end.interrupted && details.find_first_not_of(" \t\r\n") != std::string::npos) {
      text += "\n\n";
      text += code_block(details);
    }
    add_paragraph(text, out);
  }
  if (!trailer.empty()) add_paragraph(trailer, out);

  json delta = json::object();
  out.push_back(chunk(std::move(delta), finish_reason()));
  out.back()["usage"] = usage();
  finished_ = true;
  return out;
}

std::string OpenAiStream::finish_reason() const {
  if (result_ && result_->subtype == "error_max_turns") return "length";
  return "stop";
}

json OpenAiStream::usage() const {
  TokenUsage u = partial_usage_;
  u.output_tokens += partial_output_;
  if (result_) u = result_->usage;
  const uint64_t prompt = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", u.output_tokens},
              {"total_tokens", prompt + u.output_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cache_read_input_tokens}}}};
}

json OpenAiStream::completion() const {
  json message = {{"role", "assistant"}, {"content", content_}};
  if (!reasoning_.empty()) message["reasoning_content"] = reasoning_;
  return json{{"id", id_},
              {"object", "chat.completion"},
              {"created", created_},
              {"model", model_},
              {"choices",
               json::array({json{{"index", 0}, {"message", std::move(message)}, {"finish_reason", finish_reason()}}})},
              {"usage", usage()}};
}

void OpenAiStream::add_content(std::string_view text, Chunks& out) {
  if (text.empty()) return;
  content_ += text;
  out.push_back(chunk(json{{"content", text}}));
}

void OpenAiStream::add_reasoning(std::string_view text, Chunks& out) {
  if (text.empty()) return;
  reasoning_ += text;
  out.push_back(chunk(json{{"reasoning_content", text}}));
}

void OpenAiStream::add_paragraph(std::string_view text, Chunks& out) {
  std::string piece;
  if (!content_.empty()) {
    size_t newlines = 0;
    for (auto it = content_.rbegin(); it != content_.rend() && *it == '\n' && newlines < 2; ++it) ++newlines;
    piece.assign(2 - newlines, '\n');
  }
  piece += text;
  add_content(piece, out);
}

void OpenAiStream::add_tool_block(const std::string& id, const std::string& name, const json& input,
                                  std::string_view result, Chunks& out) {
  std::string shown(result.substr(0, utf8_cut(result, options_.max_tool_result_bytes)));
  if (shown.size() < result.size()) shown += fmt::format("\n… ({} more bytes)", result.size() - shown.size());
  std::string block;
  if (!content_.empty() && content_.back() != '\n') block += '\n';  // the block starts a line
  block += tool_call_block(id, name, input, shown);
  add_content(block, out);
}

json OpenAiStream::chunk(json delta, const json& finish_reason) {
  if (!role_sent_) {
    delta["role"] = "assistant";
    role_sent_ = true;
  }
  return json{
      {"id", id_},
      {"object", "chat.completion.chunk"},
      {"created", created_},
      {"model", model_},
      {"choices", json::array({json{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish_reason}}})}};
}

}  // namespace agentbox::agent
