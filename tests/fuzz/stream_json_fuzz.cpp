// Claude Code's stream-json output as the agent runner reads it (agent/stream_json_parser.* and
// stream_json_decode.*): the input is the CLI's stdout, fed all at once and again in chunks of
// 1 to 97 bytes (chosen by the first byte), then finish(). Small limits (lines of 2 KiB, four
// diagnostics of 64 bytes) so inputs reach them.
//
// Checks: nothing throws (decoding never fails on content); both feedings give the same events
// and counts; an event's line has no newline and is within the limit; the diagnostics kept are
// bounded in number and length, and a diagnostic cut from valid UTF-8 is valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "agent/stream_json_parser.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace agentbox::agent;

const StreamJsonParser::Limits kLimits{.max_line_bytes = 2048, .diagnostic_lines = 4, .diagnostic_line_bytes = 64};

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// What an event says, in a form two runs can be compared by.
std::string summary(const Event& e) {
  std::string out = std::to_string(e.body.index()) + ":" + std::string(e.line) + "|";
  std::visit(
      [&](const auto& body) {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, Diagnostic>) out += body.text;
        if constexpr (std::is_same_v<T, OtherEvent>) out += body.type + "/" + body.subtype;
        if constexpr (std::is_same_v<T, SystemInit>)
          out += body.session_id + body.model + std::to_string(body.tools.size());
        if constexpr (std::is_same_v<T, StreamEvent>) out += std::to_string(static_cast<int>(body.kind)) + body.text;
        if constexpr (std::is_same_v<T, AssistantMessage>) out += body.message_id + std::to_string(body.blocks.size());
        if constexpr (std::is_same_v<T, UserMessage>) out += std::to_string(body.tool_results.size()) + body.text;
        if constexpr (std::is_same_v<T, RunResult>) out += body.subtype + body.result + std::to_string(body.num_turns);
      },
      e.body);
  return out + "\n";
}

struct Run {
  std::string events;
  std::uint64_t lines = 0, skipped = 0;
  std::deque<std::string> diagnostics;
};

Run parse(std::string_view input, std::size_t piece) {
  Run run;
  StreamJsonParser parser(kLimits);
  auto on_event = [&](const Event& e) {
    FUZZ_CHECK(e.line.find('\n') == std::string_view::npos);
    FUZZ_CHECK(e.line.size() <= kLimits.max_line_bytes);
    if (const auto* d = std::get_if<Diagnostic>(&e.body); d && !e.line.empty()) {
      FUZZ_CHECK(d->text.size() <= kLimits.diagnostic_line_bytes);
      FUZZ_CHECK(std::string_view(e.line).starts_with(d->text));
      if (valid_utf8(e.line)) FUZZ_CHECK(valid_utf8(d->text));
    }
    run.events += summary(e);
  };
  for (std::size_t i = 0; i < input.size(); i += piece) parser.feed(input.substr(i, piece), on_event);
  parser.finish(on_event);
  run.lines = parser.lines();
  run.skipped = parser.skipped_lines();
  run.diagnostics = parser.diagnostics();
  FUZZ_CHECK(run.diagnostics.size() <= kLimits.diagnostic_lines);
  for (const auto& d : run.diagnostics) FUZZ_CHECK(d.size() <= 128);  // a cut line, or our own "skipped" note
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const Run whole = parse(input, input.size());
  const Run pieces = parse(input, 1 + data[0] % 97);
  FUZZ_CHECK(whole.events == pieces.events);
  FUZZ_CHECK(whole.lines == pieces.lines && whole.skipped == pieces.skipped);
  FUZZ_CHECK(whole.diagnostics == pieces.diagnostics);
  return 0;
}
