#include "agent/transcript.hpp"

namespace agentbox::agent {

namespace {

using nlohmann::json;

std::string string_at(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool true_at(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_boolean() && it->get<bool>();
}

// The text of a user message's content: the string, or its text blocks (not tool results).
std::string user_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (!content.is_array()) return text;
  for (const json& block : content)
    if (block.is_object() && string_at(block, "type") == "text") {
      if (!text.empty()) text += "\n";
      text += string_at(block, "text");
    }
  return text;
}

}  // namespace

Transcript parse_transcript(std::string_view jsonl) {
  Transcript t;
  while (!jsonl.empty()) {
    const size_t end = jsonl.find('\n');
    std::string_view line = jsonl.substr(0, end);
    jsonl.remove_prefix(end == std::string_view::npos ? jsonl.size() : end + 1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json o = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!o.is_object()) {
      ++t.skipped_lines;
      continue;
    }
    if (t.session_id.empty()) t.session_id = string_at(o, "sessionId");
    const std::string type = string_at(o, "type");
    if (type != "user" && type != "assistant") continue;
    if (true_at(o, "isSidechain")) continue;
    auto message = o.find("message");
    if (message == o.end() || !message->is_object()) continue;
    if (t.cwd.empty()) t.cwd = string_at(o, "cwd");
    TranscriptMessage m;
    m.role = string_at(*message, "role");
    if (m.role.empty()) m.role = type;
    m.content = message->value("content", json());
    m.timestamp = string_at(o, "timestamp");
    m.uuid = string_at(o, "uuid");
    m.model = string_at(*message, "model");
    m.meta = true_at(o, "isMeta");
    m.api_error = true_at(o, "isApiErrorMessage");
    if (t.first_prompt.empty() && m.role == "user") t.first_prompt = user_text(m.content);
    t.messages.push_back(std::move(m));
  }
  return t;
}

bool is_session_id(std::string_view id) {
  if (id.size() != 36) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  }
  return true;
}

}  // namespace agentbox::agent
