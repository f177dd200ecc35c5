#include "agent/sse_frames.hpp"

#include <nlohmann/json.hpp>

namespace agentbox::agent::sse {

namespace {

// Appends `FIELD: line\n` for each line of text ("\r\n", "\r" and "\n" all end a line in SSE).
void append_field(std::string& out, std::string_view field, std::string_view text) {
  while (true) {
    size_t end = text.find_first_of("\r\n");
    out += field;
    out += ": ";
    out += text.substr(0, end);
    out += '\n';
    if (end == std::string_view::npos) return;
    size_t skip = (text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n') ? 2 : 1;
    text.remove_prefix(end + skip);
  }
}

}  // namespace

std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string data(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  append_field(out, "data", text);
  out += '\n';
  return out;
}

// Qualified: an unqualified data(std::string) would find std::data by argument lookup.
std::string json_data(const nlohmann::json& value) { return sse::data(std::string_view(dump(value))); }

std::string done() { return "data: [DONE]\n\n"; }

std::string event(std::string_view name, std::string_view text) {
  std::string out;
  out.reserve(name.size() + text.size() + 16);
  append_field(out, "event", name);
  append_field(out, "data", text);
  out += '\n';
  return out;
}

std::string json_event(std::string_view name, const nlohmann::json& value) {
  return sse::event(name, std::string_view(dump(value)));
}

std::string comment(std::string_view text) {
  std::string out;
  append_field(out, "", text);  // ": text" per line
  out += '\n';
  return out;
}

}  // namespace agentbox::agent::sse
