#include "agent/native_events.hpp"

#include <fmt/format.h>

#include <cstring>

#include "agent/sse_frames.hpp"

namespace agentbox::agent::native {

std::string line_event(const Event& event) {
  if (const auto* diag = std::get_if<Diagnostic>(&event.body))
    return sse::json_event("diagnostic", nlohmann::json{{"text", diag->text}});
  return sse::event("claude", event.line);
}

std::string artifact_event(const nlohmann::json& artifact) { return sse::json_event("artifact", artifact); }

std::string exit_event(const RunEnd& end, const nlohmann::json& extra) {
  nlohmann::json data = extra.is_object() ? extra : nlohmann::json::object();
  data["exit_code"] = end.exit_code ? nlohmann::json(*end.exit_code) : nlohmann::json(nullptr);
  if (end.signal) {
    const char* abbrev = sigabbrev_np(*end.signal);
    data["signal"] = abbrev ? fmt::format("SIG{}", abbrev) : std::to_string(*end.signal);
  } else {
    data["signal"] = nullptr;
  }
  data["interrupted"] = end.interrupted;
  return sse::json_event("exit", data);
}

}  // namespace agentbox::agent::native
