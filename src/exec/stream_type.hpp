#pragma once
// Which stream a piece of output came from, as stored in the log and named in the API.
#include <array>
#include <cstdint>
#include <string_view>

namespace agentbox::exec {

enum class StreamType : uint8_t {
  output = 0,  // pty: stdout and stderr merged by the terminal
  stdout_pipe = 1,
  stderr_pipe = 2,
};
constexpr size_t kStreamTypes = 3;

struct StreamTypeName {
  StreamType type;
  std::string_view name;  // the "type" of an output chunk in API.md
};
constexpr std::array<StreamTypeName, kStreamTypes> kStreamTypeNames = {{
    {StreamType::output, "output"},
    {StreamType::stdout_pipe, "stdout"},
    {StreamType::stderr_pipe, "stderr"},
}};

constexpr std::string_view to_string(StreamType t) {
  for (const auto& n : kStreamTypeNames)
    if (n.type == t) return n.name;
  return "output";
}

constexpr bool is_stream_type(uint8_t raw) { return raw < kStreamTypes; }

}  // namespace agentbox::exec
