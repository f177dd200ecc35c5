#include "agent/stream_json_decode.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

namespace agentbox::agent {

namespace {

using nlohmann::json;

const json& member(const json& object, const char* key) {
  static const json absent;
  if (!object.is_object()) return absent;
  auto it = object.find(key);
  return it == object.end() ? absent : *it;
}

std::string str(const json& object, const char* key) {
  const json& v = member(object, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::optional<uint64_t> opt_u64(const json& object, const char* key) {
  const json& v = member(object, key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d >= 0 && d < 1.8e19) return static_cast<uint64_t>(d);
  }
  return std::nullopt;
}

uint64_t u64(const json& object, const char* key) { return opt_u64(object, key).value_or(0); }

double number(const json& object, const char* key) {
  const json& v = member(object, key);
  return v.is_number() ? v.get<double>() : 0.0;
}

bool flag(const json& object, const char* key) {
  const json& v = member(object, key);
  return v.is_boolean() && v.get<bool>();
}

std::optional<int> status_code(const json& object, const char* key) {
  auto v = opt_u64(object, key);
  if (!v || *v > 999) return std::nullopt;
  return static_cast<int>(*v);
}

TokenUsage read_usage(const json& usage) {
  TokenUsage u;
  u.input_tokens = u64(usage, "input_tokens");
  u.output_tokens = u64(usage, "output_tokens");
  u.cache_creation_input_tokens = u64(usage, "cache_creation_input_tokens");
  u.cache_read_input_tokens = u64(usage, "cache_read_input_tokens");
  return u;
}

// Text of a content value that is a string or an array of parts ({type:"text",text} and others,
// which are named by their type so a reader sees that something was there).
std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (!content.is_array()) return out;
  for (const json& part : content) {
    std::string piece;
    if (part.is_string()) {
      piece = part.get<std::string>();
    } else if (str(part, "type") == "text") {
      piece = str(part, "text");
    } else if (std::string type = str(part, "type"); !type.empty()) {
      piece = "[" + type + "]";
    } else {
      continue;
    }
    if (!out.empty()) out += '\n';
    out += piece;
  }
  return out;
}

EventBody decode_system(const json& object) {
  std::string subtype = str(object, "subtype");
  if (subtype == "init") {
    SystemInit init;
    init.session_id = str(object, "session_id");
    init.model = str(object, "model");
    init.cwd = str(object, "cwd");
    init.permission_mode = str(object, "permissionMode");
    init.version = str(object, "claude_code_version");
    const json& tools = member(object, "tools");
    if (tools.is_array())
      for (const json& t : tools)
        if (t.is_string()) init.tools.push_back(t.get<std::string>());
    return init;
  }
  if (subtype == "api_retry") {
    ApiRetry retry;
    retry.attempt = u64(object, "attempt");
    retry.max_retries = u64(object, "max_retries");
    retry.error_status = status_code(object, "error_status");
    retry.error = str(object, "error");
    retry.retry_delay_ms = number(object, "retry_delay_ms");
    return retry;
  }
  return OtherEvent{"system", subtype};
}

StreamEvent::Block block_type(const std::string& type) {
  if (type == "text") return StreamEvent::Block::text;
  if (type == "thinking") return StreamEvent::Block::thinking;
  if (type == "tool_use") return StreamEvent::Block::tool_use;
  return StreamEvent::Block::other;
}

EventBody decode_stream_event(const json& object) {
  StreamEvent ev;
  ev.parent_tool_use_id = str(object, "parent_tool_use_id");
  const json& event = member(object, "event");
  std::string type = str(event, "type");
  ev.index = u64(event, "index");
  if (type == "message_start") {
    ev.kind = StreamEvent::Kind::message_start;
    const json& message = member(event, "message");
    ev.message_id = str(message, "id");
    if (member(message, "usage").is_object()) ev.usage = read_usage(member(message, "usage"));
  } else if (type == "content_block_start") {
    ev.kind = StreamEvent::Kind::content_block_start;
    const json& block = member(event, "content_block");
    ev.block = block_type(str(block, "type"));
    ev.tool_id = str(block, "id");
    ev.tool_name = str(block, "name");
    ev.text = ev.block == StreamEvent::Block::thinking ? str(block, "thinking") : str(block, "text");
  } else if (type == "content_block_delta") {
    ev.kind = StreamEvent::Kind::content_block_delta;
    const json& delta = member(event, "delta");
    std::string delta_type = str(delta, "type");
    if (delta_type == "text_delta") {
      ev.delta = StreamEvent::Delta::text;
      ev.text = str(delta, "text");
    } else if (delta_type == "thinking_delta") {
      ev.delta = StreamEvent::Delta::thinking;
      ev.text = str(delta, "thinking");
    } else if (delta_type == "input_json_delta") {
      ev.delta = StreamEvent::Delta::input_json;
      ev.text = str(delta, "partial_json");
    } else if (delta_type == "signature_delta") {
      ev.delta = StreamEvent::Delta::signature;
    }
  } else if (type == "content_block_stop") {
    ev.kind = StreamEvent::Kind::content_block_stop;
  } else if (type == "message_delta") {
    ev.kind = StreamEvent::Kind::message_delta;
    ev.stop_reason = str(member(event, "delta"), "stop_reason");
    if (member(event, "usage").is_object()) ev.usage = read_usage(member(event, "usage"));
  } else if (type == "message_stop") {
    ev.kind = StreamEvent::Kind::message_stop;
  }
  return ev;
}

EventBody decode_assistant(const json& object) {
  AssistantMessage msg;
  const json& message = member(object, "message");
  msg.message_id = str(message, "id");
  msg.model = str(message, "model");
  msg.parent_tool_use_id = str(object, "parent_tool_use_id");
  msg.error = str(object, "error");
  const json& content = member(message, "content");
  if (content.is_string()) {  // not seen from the CLI, but a valid Messages API shape
    msg.blocks.push_back(ContentBlock{ContentBlock::Type::text, content.get<std::string>(), {}, {}, {}});
    return msg;
  }
  if (!content.is_array()) return msg;
  for (const json& block : content) {
    ContentBlock b;
    std::string type = str(block, "type");
    if (type == "text") {
      b.type = ContentBlock::Type::text;
      b.text = str(block, "text");
    } else if (type == "thinking") {
      b.type = ContentBlock::Type::thinking;
      b.text = str(block, "thinking");
    } else if (type == "tool_use" || type == "server_tool_use") {
      b.type = ContentBlock::Type::tool_use;
      b.tool_id = str(block, "id");
      b.tool_name = str(block, "name");
      const json& input = member(block, "input");
      b.input = input.is_null() ? json::object() : input;
    }
    msg.blocks.push_back(std::move(b));
  }
  return msg;
}

EventBody decode_user(const json& object) {
  UserMessage msg;
  msg.parent_tool_use_id = str(object, "parent_tool_use_id");
  const json& content = member(member(object, "message"), "content");
  if (content.is_string()) {
    msg.text = content.get<std::string>();
    return msg;
  }
  if (!content.is_array()) return msg;
  for (const json& block : content) {
    std::string type = str(block, "type");
    if (type == "tool_result") {
      msg.tool_results.push_back(
          ToolResult{str(block, "tool_use_id"), content_text(member(block, "content")), flag(block, "is_error")});
    } else if (type == "text") {
      if (!msg.text.empty()) msg.text += '\n';
      msg.text += str(block, "text");
    }
  }
  return msg;
}

EventBody decode_result(const json& object) {
  RunResult r;
  r.subtype = str(object, "subtype");
  r.is_error = flag(object, "is_error");
  r.result = str(object, "result");
  r.session_id = str(object, "session_id");
  r.stop_reason = str(object, "stop_reason");
  r.terminal_reason = str(object, "terminal_reason");
  r.api_error_status = status_code(object, "api_error_status");
  const json& errors = member(object, "errors");
  if (errors.is_array())
    for (const json& e : errors) {
      if (e.is_string())
        r.errors.push_back(e.get<std::string>());
      else if (std::string m = str(e, "message"); !m.empty())
        r.errors.push_back(m);
    }
  r.total_cost_usd = number(object, "total_cost_usd");
  r.usage = read_usage(member(object, "usage"));
  r.num_turns = u64(object, "num_turns");
  r.duration_ms = u64(object, "duration_ms");
  r.duration_api_ms = u64(object, "duration_api_ms");
  const json& denials = member(object, "permission_denials");
  if (denials.is_array()) r.permission_denials = denials.size();
  return r;
}

}  // namespace

EventBody decode_stream_json(const nlohmann::json& object) {
  std::string type = str(object, "type");
  if (type == "system") return decode_system(object);
  if (type == "stream_event") return decode_stream_event(object);
  if (type == "assistant") return decode_assistant(object);
  if (type == "user") return decode_user(object);
  if (type == "result") return decode_result(object);
  return OtherEvent{type, str(object, "subtype")};
}

}  // namespace agentbox::agent
