#pragma once
// One stream-json line, already parsed as JSON, to its typed event (stream_json_events.hpp).
// Never throws on content: a key of an unexpected type reads as absent, an unknown type is an
// OtherEvent, so a new CLI version degrades to "less understood", never to an error.
#include <nlohmann/json_fwd.hpp>

#include "agent/stream_json_events.hpp"

namespace agentbox::agent {

// `object` must be a JSON object.
EventBody decode_stream_json(const nlohmann::json& object);

}  // namespace agentbox::agent
