#pragma once
// What an OpenAI chat-completions request asks of Claude Code (API.md Part B): the last user
// message is the turn's prompt (Claude Code keeps the conversation itself, resumed per chat),
// system messages are added to the system prompt, and images and files sent as data URIs
// (`image_url`, OpenAI's `file` parts) are files the turn is given in its chat directory. Pure:
// no box, no files.
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "util/error.hpp"

namespace agentbox::agent {

// The request is not one we can run (the route answers 400 with what()).
class ChatRequestError : public Error {
 public:
  explicit ChatRequestError(std::string message) : Error(std::move(message)) {}
};

struct ChatAttachment {
  std::string name;   // file name in the chat directory: "attachment-1.png", "2-report.pdf"
  std::string bytes;  // decoded
};

struct ChatRequest {
  std::string model;
  bool stream = false;
  std::string prompt;  // the last user message's text, naming its attachments
  std::string system;  // the request's system messages, joined
  std::vector<ChatAttachment> attachments;
  bool include_usage = true;  // stream_options.include_usage (a final usage chunk)
};

// Throws ChatRequestError for a body without a user message or with a malformed part.
// max_attachment_bytes bounds each decoded image.
ChatRequest parse_chat_request(const nlohmann::json& body, size_t max_attachment_bytes);

// A directory name for a chat id: the id when it is plain ([A-Za-z0-9._-], not starting with
// '.', at most 64 characters), else its plain characters and a hash of the whole id, so that
// two ids never share a directory and none leaves ~/chats.
std::string chat_dir_name(std::string_view chat_id);

// Standard base64 (RFC 4648, padding optional, no line breaks); throws ChatRequestError.
std::string decode_base64(std::string_view text);

}  // namespace agentbox::agent
