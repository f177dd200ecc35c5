#include "net/anthropic_usage.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace agentbox::net {

namespace {

bool starts_with_ci(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  return std::equal(prefix.begin(), prefix.end(), text.begin(),
                    [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A count the API gives as a non-negative integer; anything else is not a count.
bool read_count(const nlohmann::json& usage, const char* key, uint64_t& out) {
  auto it = usage.find(key);
  if (it == usage.end() || !it->is_number_unsigned()) return false;
  out = it->get<uint64_t>();
  return true;
}

}  // namespace

UsageMeter::UsageMeter(std::string_view content_type) {
  std::string_view type = trim(content_type.substr(0, content_type.find(';')));
  if (starts_with_ci(type, "text/event-stream") && type.size() == 17)
    mode_ = Mode::event_stream;
  else if (starts_with_ci(type, "application/json") && type.size() == 16)
    mode_ = Mode::json;
}

void UsageMeter::feed(std::string_view bytes) {
  if (mode_ == Mode::json) {
    if (pending_.size() + bytes.size() > kJsonLimit) {
      mode_ = Mode::none;  // too large to be an answer with usage worth reading
      std::string().swap(pending_);
      return;
    }
    pending_.append(bytes);
    return;
  }
  if (mode_ != Mode::event_stream) return;
  while (!bytes.empty()) {
    size_t end = bytes.find('\n');
    std::string_view piece = bytes.substr(0, end);
    if (!skipping_) {
      if (pending_.size() + piece.size() > kLineLimit) {
        skipping_ = true;
        std::string().swap(pending_);
      } else {
        pending_.append(piece);
      }
    }
    if (end == std::string_view::npos) return;
    if (!skipping_) on_line(pending_);
    pending_.clear();
    skipping_ = false;
    bytes.remove_prefix(end + 1);
  }
}

void UsageMeter::on_line(std::string_view line) {
  if (!line.starts_with("data:")) return;
  line = trim(line.substr(5));
  if (line.empty() || line.front() != '{') return;
  nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) return;
  auto type = event.find("type");
  if (type == event.end() || !type->is_string()) return;
  if (*type == "message_start") {
    auto message = event.find("message");
    if (message != event.end() && message->is_object()) {
      auto usage = message->find("usage");
      if (usage != message->end()) read_usage(*usage);
    }
  } else if (*type == "message_delta") {
    auto usage = event.find("usage");
    if (usage != event.end()) read_usage(*usage);
  }
}

// Counts are cumulative within one answer: a later report replaces an earlier one.
void UsageMeter::read_usage(const nlohmann::json& usage) {
  if (!usage.is_object()) return;
  read_count(usage, "input_tokens", counts_.input_tokens);
  read_count(usage, "output_tokens", counts_.output_tokens);
  read_count(usage, "cache_creation_input_tokens", counts_.cache_creation_input_tokens);
  read_count(usage, "cache_read_input_tokens", counts_.cache_read_input_tokens);
}

TokenCounts UsageMeter::finish() {
  if (mode_ == Mode::json) {
    nlohmann::json body = nlohmann::json::parse(pending_, nullptr, /*allow_exceptions=*/false);
    if (body.is_object()) {
      auto usage = body.find("usage");
      if (usage != body.end()) read_usage(*usage);
    }
    std::string().swap(pending_);
  } else if (mode_ == Mode::event_stream && !pending_.empty() && !skipping_) {
    on_line(pending_);  // a last line without its newline
    pending_.clear();
  }
  mode_ = Mode::none;
  return counts_;
}

}  // namespace agentbox::net
