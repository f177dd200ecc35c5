#pragma once
// Tokens a model answer used, read from the answer as it streams through the gateway (the
// Messages API reports them in the answer itself):
//   text/event-stream: `message_start` carries message.usage (input, cache, first output
//     count), each `message_delta` carries usage with the output count so far;
//   application/json: the body's top-level `usage`.
// The meter never holds more than one event line (or, for JSON, one bounded body), and
// ignores whatever it does not understand: an answer it cannot read counts no tokens rather
// than failing the request.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "store/token_usage.hpp"

namespace agentbox::net {

using agentbox::TokenCounts;

class UsageMeter {
 public:
  static constexpr size_t kLineLimit = 1 << 20;  // a longer SSE line is skipped (usage lines are small)
  static constexpr size_t kJsonLimit = 8 << 20;  // a longer JSON body is not read for usage

  // content_type: the answer's Content-Type field.
  explicit UsageMeter(std::string_view content_type);

  // Body bytes as they arrive (after transfer decoding), in any chunking.
  void feed(std::string_view bytes);
  // What the answer used; call once the body is complete.
  TokenCounts finish();

 private:
  enum class Mode { none, event_stream, json };
  void on_line(std::string_view line);
  void read_usage(const nlohmann::json& usage);

  Mode mode_ = Mode::none;
  std::string pending_;    // an SSE line not yet ended, or the JSON body so far
  bool skipping_ = false;  // the current SSE line outgrew kLineLimit
  TokenCounts counts_;
};

}  // namespace agentbox::net
