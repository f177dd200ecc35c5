#pragma once
// Incremental parser of Claude Code's `--output-format stream-json` output (one JSON object per
// line, stream_json_events.hpp). Bytes arrive in chunks of any size from the CLI's stdout;
// every complete line becomes one Event handed to the callback:
//
//   StreamJsonParser parser;
//   parser.feed(bytes, [&](const Event& e) { ... });   // as often as bytes arrive
//   parser.finish([&](const Event& e) { ... });        // at EOF: a last line without '\n'
//
// Framing is linear in the input: a line inside one chunk is parsed in place; only a line that
// spans chunks is gathered (appended once, amortized), so lines of many MiB cost no rescans.
// A line over Limits::max_line_bytes is skipped whole (reported by a Diagnostic), which bounds
// the memory a misbehaving CLI can make us hold. Blank lines are ignored; '\r' before '\n' is
// dropped. A line that is not a JSON object is a Diagnostic event, and the last few are kept
// (bounded in count and length) for an error message when the CLI ends without a result.
// Independent of Asio and of the box: the caller owns the reading.
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>

#include "agent/stream_json_events.hpp"

namespace agentbox::agent {

class StreamJsonParser {
 public:
  struct Limits {
    size_t max_line_bytes = size_t{64} << 20;  // a longer line is skipped
    size_t diagnostic_lines = 20;              // non-JSON lines kept (the most recent)
    size_t diagnostic_line_bytes = 2048;       // each kept line is cut to this
  };
  using Callback = std::function<void(const Event&)>;

  StreamJsonParser() = default;
  explicit StreamJsonParser(Limits limits) : limits_(limits) {}

  // The next bytes of the output; calls on_event for each line they complete, in order.
  void feed(std::string_view bytes, const Callback& on_event);
  // End of output: a last line without a newline still counts. Further feeds start afresh.
  void finish(const Callback& on_event);

  // The most recent non-JSON lines (each cut to diagnostic_line_bytes), oldest first.
  const std::deque<std::string>& diagnostics() const { return diagnostics_; }
  uint64_t lines() const { return lines_; }            // lines parsed (blank ones not counted)
  uint64_t skipped_lines() const { return skipped_; }  // lines over max_line_bytes

 private:
  void on_line(std::string_view line, const Callback& on_event);
  void on_skipped(const Callback& on_event);
  void keep_diagnostic(std::string_view text);

  Limits limits_;
  std::string pending_;    // the start of a line that spans chunks
  bool skipping_ = false;  // the current line outgrew max_line_bytes; drop until '\n'
  uint64_t skipping_bytes_ = 0;
  std::deque<std::string> diagnostics_;
  uint64_t lines_ = 0;
  uint64_t skipped_ = 0;
};

}  // namespace agentbox::agent
