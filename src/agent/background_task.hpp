#pragma once
// Open WebUI's background tasks (title, tags, follow-up suggestions, ...), told from chat turns
// and answered without an agent run (api/agent_tasks.hpp): one plain Messages API call, or
// without a model a short reply of the shape the task asks for. Pure: no box, no network.
//
// A request is a task when it carries the X-OpenWebUI-Task header (an admin adds it to the
// connection as {"X-OpenWebUI-Task": "{{TASK}}"}; it is empty on chat turns), or else when it
// has the shape of Open WebUI's default task prompts: not streamed, and its one message besides
// system messages is the user's, beginning "### Task:" (../shared/OWUI-NOTES.md).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentbox::agent {

// What the task asks for, by the JSON its reply must hold (Open WebUI parses the reply from
// the first '{' to the last '}').
enum class TaskKind {
  title,         // {"title": "..."}
  tags,          // {"tags": [...]}
  follow_ups,    // {"follow_ups": [...]}
  queries,       // {"queries": [...]}
  autocomplete,  // {"text": "..."}
  other,         // anything else (an emoji, merged responses): plain text
};

struct BackgroundTask {
  TaskKind kind = TaskKind::other;
  std::string name;  // the header's value ("title_generation"), or the kind's name when none
  bool stream = false;
};

// The task `body` (a chat-completions request) is, or nullopt for a chat turn. header: the
// X-OpenWebUI-Task header's value when present.
std::optional<BackgroundTask> background_task(const nlohmann::json& body, std::optional<std::string_view> header);

// The Messages API request that answers it: system messages joined into `system`, the other
// messages' text in order (consecutive ones of a role joined; assistant ones before the first
// user message dropped), no tools. Throws ChatRequestError when no user text is left.
nlohmann::json task_messages_request(const nlohmann::json& body, const std::string& model, int max_tokens);

// The text of a Messages API answer's text blocks, joined; nullopt when `answer` is none.
std::optional<std::string> messages_answer_text(const nlohmann::json& answer);

// A reply of the shape the task asks for, made without a model: a title of the chat's first
// words, no tags, no follow-ups, no queries, no completion.
std::string fallback_reply(const BackgroundTask& task, const nlohmann::json& body);

// The task's reply as OpenAI answers: a whole chat.completion, or (streamed) its chunks.
// usage: the Messages API's usage object (input_tokens, output_tokens, ...), or null.
nlohmann::json task_completion(const std::string& model, const std::string& id, std::int64_t created,
                               const std::string& text, const nlohmann::json& usage);
nlohmann::json task_chunks(const std::string& model, const std::string& id, std::int64_t created,
                           const std::string& text, const nlohmann::json& usage);

}  // namespace agentbox::agent
