#include "agent/stream_json_parser.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/stream_json_decode.hpp"
#include "util/utf8.hpp"

namespace agentbox::agent {

void StreamJsonParser::feed(std::string_view bytes, const Callback& on_event) {
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, nl);  // all of bytes when there is no '\n'
    const bool ends_line = nl != std::string_view::npos;
    bytes.remove_prefix(ends_line ? nl + 1 : bytes.size());

    if (skipping_) {
      skipping_bytes_ += piece.size();
      if (ends_line) on_skipped(on_event);
      continue;
    }
    if (pending_.size() + piece.size() > limits_.max_line_bytes) {
      skipping_ = true;
      skipping_bytes_ = pending_.size() + piece.size();
      std::string().swap(pending_);  // give the memory back now, not after the line
      if (ends_line) on_skipped(on_event);
      continue;
    }
    if (!ends_line) {
      pending_.append(piece);
      continue;
    }
    if (pending_.empty()) {
      on_line(piece, on_event);  // the common case: the whole line is in this chunk
    } else {
      pending_.append(piece);
      std::string line = std::move(pending_);  // pending_ is empty again before the callback runs
      pending_.clear();
      on_line(line, on_event);
    }
  }
}

void StreamJsonParser::finish(const Callback& on_event) {
  if (skipping_) {
    on_skipped(on_event);
  } else if (!pending_.empty()) {
    std::string line = std::move(pending_);
    pending_.clear();
    on_line(line, on_event);
  }
}

void StreamJsonParser::on_line(std::string_view line, const Callback& on_event) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  ++lines_;
  nlohmann::json object = nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) {  // not JSON (discarded), or JSON that is not an object
    std::string text(line.substr(0, utf8_cut(line, limits_.diagnostic_line_bytes)));
    keep_diagnostic(text);
    on_event(Event{line, Diagnostic{std::move(text)}});
    return;
  }
  on_event(Event{line, decode_stream_json(object)});
}

void StreamJsonParser::on_skipped(const Callback& on_event) {
  std::string text = fmt::format("(a line of {} bytes was skipped: longer than the limit of {} bytes)", skipping_bytes_,
                                 limits_.max_line_bytes);
  skipping_ = false;
  skipping_bytes_ = 0;
  ++skipped_;
  keep_diagnostic(text);
  on_event(Event{std::string_view(), Diagnostic{std::move(text)}});
}

void StreamJsonParser::keep_diagnostic(std::string_view text) {
  if (limits_.diagnostic_lines == 0) return;
  if (diagnostics_.size() == limits_.diagnostic_lines) diagnostics_.pop_front();
  diagnostics_.emplace_back(text);
}

}  // namespace agentbox::agent
