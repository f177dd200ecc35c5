#include "agent/background_task.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "agent/chat_request.hpp"

namespace agentbox::agent {

namespace {

using nlohmann::json;

// A message's text: a string content, or its text parts joined.
std::string text_of(const json& message) {
  auto content = message.find("content");
  if (content == message.end()) return {};
  if (content->is_string()) return content->get<std::string>();
  std::string out;
  if (!content->is_array()) return out;
  for (const json& part : *content) {
    if (!part.is_object() || part.value("type", "") != "text") continue;
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) continue;
    if (!out.empty()) out += "\n";
    out += t->get<std::string>();
  }
  return out;
}

std::string role_of(const json& message) {
  if (!message.is_object()) return {};
  auto role = message.find("role");
  return role != message.end() && role->is_string() ? role->get<std::string>() : std::string();
}

bool is_system(const std::string& role) { return role == "system" || role == "developer"; }

// The key a default prompt asks the reply to hold, looked for in the prompt's instructions
// (before the chat history it embeds, which may say anything).
TaskKind kind_of_prompt(std::string_view prompt) {
  const std::string_view instructions = prompt.substr(0, prompt.find("<chat_history>"));
  static constexpr std::array<std::pair<std::string_view, TaskKind>, 5> kKeys = {{
      {"\"follow_ups\"", TaskKind::follow_ups},
      {"\"tags\"", TaskKind::tags},
      {"\"queries\"", TaskKind::queries},
      {"\"title\"", TaskKind::title},
      {"\"text\"", TaskKind::autocomplete},
  }};
  for (const auto& [key, kind] : kKeys)
    if (instructions.find(key) != std::string_view::npos) return kind;
  return TaskKind::other;
}

// Open WebUI's {{TASK}} values (its TASKS enum).
TaskKind kind_of_header(std::string_view name) {
  if (name.starts_with("title")) return TaskKind::title;
  if (name.starts_with("tags")) return TaskKind::tags;
  if (name.starts_with("follow_up")) return TaskKind::follow_ups;
  if (name.starts_with("query") || name.starts_with("queries")) return TaskKind::queries;
  if (name.starts_with("autocomplete")) return TaskKind::autocomplete;
  return TaskKind::other;
}

std::string_view name_of(TaskKind kind) {
  switch (kind) {
    case TaskKind::title: return "title_generation";
    case TaskKind::tags: return "tags_generation";
    case TaskKind::follow_ups: return "follow_up_generation";
    case TaskKind::queries: return "query_generation";
    case TaskKind::autocomplete: return "autocomplete_generation";
    case TaskKind::other: break;
  }
  return "task";
}

// The first user text of the chat the task embeds ("USER: ..." in <chat_history>), else the
// request's last user text: what a title is made of without a model.
std::string first_words(const json& body, size_t words, size_t max_bytes) {
  std::string source;
  if (auto messages = body.find("messages"); messages != body.end() && messages->is_array())
    for (const json& m : *messages)
      if (role_of(m) == "user") source = text_of(m);
  if (auto history = source.find("<chat_history>"); history != std::string::npos) {
    std::string_view rest = std::string_view(source).substr(history);
    if (auto user = rest.find("USER:"); user != std::string_view::npos) {
      rest = rest.substr(user + 5);
      source = std::string(rest.substr(0, rest.find('\n')));
    }
  }
  std::string out;
  size_t taken = 0, i = 0;
  while (taken < words && i < source.size()) {
    while (i < source.size() && std::isspace(static_cast<unsigned char>(source[i]))) ++i;
    size_t end = i;
    while (end < source.size() && !std::isspace(static_cast<unsigned char>(source[end]))) ++end;
    if (end == i) break;
    std::string_view word = std::string_view(source).substr(i, end - i);
    if (!out.empty() && out.size() + 1 + word.size() > max_bytes) break;
    if (!out.empty()) out += ' ';
    out += word.substr(0, max_bytes);
    ++taken;
    i = end;
  }
  return out.empty() ? "New chat" : out;
}

json openai_usage(const json& usage) {
  if (!usage.is_object()) return json{{"prompt_tokens", 0}, {"completion_tokens", 0}, {"total_tokens", 0}};
  auto n = [&](const char* key) -> uint64_t {
    auto it = usage.find(key);
    if (it == usage.end() || !it->is_number_integer()) return 0;
    return it->is_number_unsigned() ? it->get<uint64_t>()
                                    : static_cast<uint64_t>(std::max<int64_t>(0, it->get<int64_t>()));
  };
  const uint64_t prompt = n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens");
  const uint64_t completion = n("output_tokens");
  return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

}  // namespace

std::optional<BackgroundTask> background_task(const json& body, std::optional<std::string_view> header) {
  if (!body.is_object()) return std::nullopt;
  BackgroundTask task;
  if (auto stream = body.find("stream"); stream != body.end() && stream->is_boolean())
    task.stream = stream->get<bool>();
  std::string prompt;
  int others = 0;
  if (auto messages = body.find("messages"); messages != body.end() && messages->is_array()) {
    for (const json& m : *messages) {
      const std::string role = role_of(m);
      if (is_system(role)) continue;
      ++others;
      if (role == "user") prompt = text_of(m);
    }
  }
  if (header && !header->empty()) {
    task.kind = kind_of_header(*header);
    if (task.kind == TaskKind::other) task.kind = kind_of_prompt(prompt);
    task.name = std::string(*header);
    return task;
  }
  if (task.stream || others != 1 || !prompt.starts_with("### Task:")) return std::nullopt;
  task.kind = kind_of_prompt(prompt);
  task.name = std::string(name_of(task.kind));
  return task;
}

json task_messages_request(const json& body, const std::string& model, int max_tokens) {
  std::string system;
  json messages = json::array();
  if (auto list = body.find("messages"); list != body.end() && list->is_array()) {
    for (const json& m : *list) {
      const std::string role = role_of(m);
      std::string text = text_of(m);
      if (text.empty()) continue;
      if (is_system(role)) {
        system += (system.empty() ? "" : "\n\n") + text;
        continue;
      }
      if (role != "user" && role != "assistant") continue;
      if (messages.empty() && role != "user") continue;  // the API's first message is the user's
      if (!messages.empty() && messages.back()["role"] == role) {
        messages.back()["content"] = messages.back()["content"].get<std::string>() + "\n\n" + text;
        continue;
      }
      messages.push_back(json{{"role", role}, {"content", std::move(text)}});
    }
  }
  if (messages.empty()) throw ChatRequestError("The request has no user message with text");
  json request = {{"model", model}, {"max_tokens", max_tokens}, {"messages", std::move(messages)}};
  if (!system.empty()) request["system"] = std::move(system);
  return request;
}

std::optional<std::string> messages_answer_text(const json& answer) {
  if (!answer.is_object() || answer.value("type", "") != "message") return std::nullopt;
  auto content = answer.find("content");
  if (content == answer.end() || !content->is_array()) return std::nullopt;
  std::string out;
  for (const json& block : *content)
    if (block.is_object() && block.value("type", "") == "text") out += block.value("text", "");
  return out;
}

std::string fallback_reply(const BackgroundTask& task, const json& body) {
  switch (task.kind) {
    case TaskKind::title:
      return json{{"title", first_words(body, 6, 60)}}.dump(-1, ' ', false, json::error_handler_t::replace);
    case TaskKind::tags: return R"({"tags": []})";
    case TaskKind::follow_ups: return R"({"follow_ups": []})";
    case TaskKind::queries: return R"({"queries": []})";
    case TaskKind::autocomplete: return R"({"text": ""})";
    case TaskKind::other: break;
  }
  return "";
}

json task_completion(const std::string& model, const std::string& id, std::int64_t created, const std::string& text,
                     const json& usage) {
  json message = {{"role", "assistant"}, {"content", text}};
  return json{
      {"id", id},
      {"object", "chat.completion"},
      {"created", created},
      {"model", model},
      {"choices", json::array({json{{"index", 0}, {"message", std::move(message)}, {"finish_reason", "stop"}}})},
      {"usage", openai_usage(usage)}};
}

json task_chunks(const std::string& model, const std::string& id, std::int64_t created, const std::string& text,
                 const json& usage) {
  auto chunk = [&](json delta, json finish) {
    return json{{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", created},
                {"model", model},
                {"choices", json::array({json{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish}}})}};
  };
  json out = json::array();
  out.push_back(chunk(json{{"role", "assistant"}, {"content", text}}, nullptr));
  out.push_back(chunk(json::object(), "stop"));
  out.back()["usage"] = openai_usage(usage);
  return out;
}

}  // namespace agentbox::agent
