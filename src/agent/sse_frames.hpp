#pragma once
// Server-Sent Events framing (WHATWG HTML §9.2) for the agent's streams: the OpenAI-compatible
// `data: {chunk}` frames with their `data: [DONE]` end, and named events for the native stream.
// A payload with line breaks is split into several `data:` lines, which a client joins back
// with '\n', so no payload can end a frame early or inject a field.
// (/execute/{id}/stream frames its own events in api/execute.cpp.)
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace agentbox::agent::sse {

// `data: TEXT\n\n`: one frame with no event name (what OpenAI clients read).
std::string data(std::string_view text);
// `data: {compact JSON}\n\n`; invalid UTF-8 in strings is replaced (U+FFFD), never a throw.
std::string json_data(const nlohmann::json& value);
// `data: [DONE]\n\n`: the end of an OpenAI stream.
std::string done();
// `event: NAME\ndata: TEXT\n\n`.
std::string event(std::string_view name, std::string_view text);
std::string json_event(std::string_view name, const nlohmann::json& value);
// `: TEXT\n\n`: a comment, which clients ignore (a keep-alive through idle proxies).
std::string comment(std::string_view text);

// Compact JSON for the wire, invalid UTF-8 replaced.
std::string dump(const nlohmann::json& value);

}  // namespace agentbox::agent::sse
