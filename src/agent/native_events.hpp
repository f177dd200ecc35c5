#pragma once
// The native agent stream (`POST /agent/runs`): Server-Sent Events that pass Claude Code's own
// stream-json lines through untouched, beside agentbox's events about the run:
//   event: claude      data: the CLI's line, byte for byte (one JSON object)
//   event: diagnostic  data: {"text"}: a stdout line that was not JSON, or a skipped long line
//   event: artifact    data: a file the turn created or changed (shape chosen by the route)
//   event: exit        data: {"exit_code","signal","interrupted", ...extra}: the last event
// A client that knows stream-json reads `claude` events as if it ran the CLI itself.
#include <nlohmann/json.hpp>

#include <string>

#include "agent/run_end.hpp"
#include "agent/stream_json_events.hpp"

namespace agentbox::agent::native {

// The frame for one parsed line: `claude` for a JSON object, `diagnostic` for anything else.
std::string line_event(const Event& event);
std::string artifact_event(const nlohmann::json& artifact);
// extra: fields the route adds (session_id, cost, ...); they do not replace the fields above.
std::string exit_event(const RunEnd& end, const nlohmann::json& extra = nlohmann::json::object());

}  // namespace agentbox::agent::native
