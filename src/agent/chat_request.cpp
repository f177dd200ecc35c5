#include "agent/chat_request.hpp"

#include <nlohmann/json.hpp>

#include "store/account_name.hpp"

namespace agentbox::agent {

namespace {

using nlohmann::json;

constexpr size_t kMaxChatDirName = 64;

// The extension an image's media type gets.
std::string extension_for(std::string_view media_type) {
  if (media_type == "image/png") return "png";
  if (media_type == "image/jpeg" || media_type == "image/jpg") return "jpg";
  if (media_type == "image/gif") return "gif";
  if (media_type == "image/webp") return "webp";
  if (media_type == "image/svg+xml") return "svg";
  return "bin";
}

// A file name the client gave, as a plain name of the chat directory ("" when nothing of it
// is usable): its last path component, plain characters only, not hidden.
std::string plain_file_name(std::string_view given) {
  if (const size_t slash = given.find_last_of("/\\"); slash != std::string_view::npos) given.remove_prefix(slash + 1);
  std::string name;
  for (char c : given)
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')
      name += c;
    else if (c == ' ')
      name += '_';
  while (!name.empty() && name.front() == '.') name.erase(0, 1);
  if (name.size() > 100) name.erase(0, name.size() - 100);
  return name;
}

// "data:image/png;base64,AAAA" -> the attachment, named `name` or attachment-INDEX.EXT; other
// URLs are refused (the box has no business fetching what the client could not send).
ChatAttachment attachment_from(std::string_view what, std::string_view url, size_t index, size_t max_bytes,
                               std::string name = {}) {
  constexpr std::string_view kData = "data:";
  const size_t comma = url.find(',');
  if (url.substr(0, kData.size()) != kData || comma == std::string_view::npos)
    throw ChatRequestError(std::string(what) + " must be a data: URL with base64 content");
  std::string_view meta = url.substr(kData.size(), comma - kData.size());
  constexpr std::string_view kBase64 = ";base64";
  if (meta.size() < kBase64.size() || meta.substr(meta.size() - kBase64.size()) != kBase64)
    throw ChatRequestError(std::string(what) + " must be a data: URL with base64 content");
  meta.remove_suffix(kBase64.size());
  std::string_view payload = url.substr(comma + 1);
  if (payload.size() / 4 * 3 > max_bytes + 3)
    throw ChatRequestError("an attached file is larger than " + std::to_string(max_bytes) + " bytes");
  ChatAttachment a;
  a.name = name.empty() ? "attachment-" + std::to_string(index) + "." + extension_for(meta)
                        : std::to_string(index) + "-" + name;  // numbered: two files never share a name
  a.bytes = decode_base64(payload);
  return a;
}

// A message's text, and its images appended to attachments.
std::string text_of(const json& content, std::vector<ChatAttachment>* attachments, size_t max_bytes) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return {};
  if (!content.is_array()) throw ChatRequestError("message content must be a string or a list of parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object()) throw ChatRequestError("message content parts must be objects");
    const std::string type = part.value("type", "");
    if (type == "text") {
      if (!text.empty()) text += "\n";
      text += part.value("text", "");
    } else if (type == "image_url" && attachments) {
      const json& image = part.contains("image_url") ? part["image_url"] : json();
      const json url = image.is_object() ? image.value("url", json()) : image;
      if (!url.is_string()) throw ChatRequestError("image_url needs a url");
      attachments->push_back(attachment_from("image_url", url.get<std::string>(), attachments->size() + 1, max_bytes));
    } else if (type == "file" && attachments) {
      // OpenAI's file input: {"type":"file","file":{"filename","file_data":"data:...;base64,..."}}.
      // A file_id names an upload of another service: nothing to write.
      const json file = part.value("file", json::object());
      if (!file.is_object()) throw ChatRequestError("a file part needs a file object");
      const json data = file.value("file_data", json());
      if (data.is_null()) continue;
      if (!data.is_string()) throw ChatRequestError("file_data must be a data: URL");
      const json given = file.value("filename", json(""));
      attachments->push_back(attachment_from("file_data", data.get<std::string>(), attachments->size() + 1, max_bytes,
                                             plain_file_name(given.is_string() ? given.get<std::string>() : "")));
    }
    // Other part types (input_audio) are not ours to run: ignored.
  }
  return text;
}

}  // namespace

std::string decode_base64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) throw ChatRequestError("invalid base64 data");
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const int v = value(c);
    if (v < 0) throw ChatRequestError("invalid base64 data");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

ChatRequest parse_chat_request(const json& body, size_t max_attachment_bytes) {
  if (!body.is_object()) throw ChatRequestError("the body must be a JSON object");
  ChatRequest req;
  req.model = body.value("model", "");
  const json stream = body.value("stream", json(false));
  req.stream = stream.is_boolean() && stream.get<bool>();
  if (auto it = body.find("stream_options"); it != body.end() && it->is_object())
    if (auto u = it->find("include_usage"); u != it->end() && u->is_boolean()) req.include_usage = u->get<bool>();
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty())
    throw ChatRequestError("messages must be a non-empty list");

  const json* last_user = nullptr;
  for (const json& m : *messages) {
    if (!m.is_object()) throw ChatRequestError("each message must be an object");
    const std::string role = m.value("role", "");
    if (role == "system" || role == "developer") {
      std::string text = text_of(m.value("content", json()), nullptr, max_attachment_bytes);
      if (text.empty()) continue;
      if (!req.system.empty()) req.system += "\n\n";
      req.system += text;
    } else if (role == "user") {
      last_user = &m;
    }
  }
  if (!last_user) throw ChatRequestError("messages must contain a user message");
  req.prompt = text_of(last_user->value("content", json()), &req.attachments, max_attachment_bytes);
  if (!req.attachments.empty()) {
    req.prompt += "\n\n(Attached, in the current directory:";
    for (const auto& a : req.attachments) req.prompt += " " + a.name;
    req.prompt += ")";
  }
  if (req.prompt.empty()) throw ChatRequestError("the last user message is empty");
  return req;
}

std::string chat_dir_name(std::string_view chat_id) {
  std::string plain;
  for (char c : chat_id)
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')
      plain += c;
  const bool as_is =
      !chat_id.empty() && plain.size() == chat_id.size() && plain.size() <= kMaxChatDirName && plain.front() != '.';
  if (as_is) return plain;
  while (!plain.empty() && plain.front() == '.') plain.erase(0, 1);
  if (plain.size() > kMaxChatDirName - 17) plain.resize(kMaxChatDirName - 17);
  if (!plain.empty()) plain += '-';
  return plain + sha256_hex(chat_id).substr(0, 16);
}

}  // namespace agentbox::agent
