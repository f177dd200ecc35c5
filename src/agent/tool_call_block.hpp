#pragma once
// A finished tool call as Open WebUI shows it: a collapsible block in the message content, in
// the exact form Open WebUI's own middleware writes for tools it ran itself
// (backend/open_webui/utils/middleware.py; src/lib/components/common/Collapsible.svelte reads it):
//
//   <details type="tool_calls" done="true" id="ID" name="NAME" arguments="ARGS" result="RESULT"
//    files="" embeds="">\n<summary>Tool Executed</summary>\n</details>\n
//
// ARGS is the call's input as JSON, RESULT the result text as a JSON string, both HTML-escaped.
// The frontend decodes the entities and parses the JSON (repeatedly, so either form shows).
// Emitting the call as content rather than `tool_calls` matters: a `tool_calls` delta makes
// Open WebUI try to run the tool itself.
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace agentbox::agent {

// Escapes text for a double-quoted HTML attribute: & < > " ' and line breaks (as &#10; and
// &#13;, so the block stays on one line for Open WebUI's block tokenizer).
std::string html_attribute_escape(std::string_view text);

// The block, ending with '\n'. input: the tool's arguments (any JSON value); result: its output.
std::string tool_call_block(std::string_view id, std::string_view name, const nlohmann::json& input,
                            std::string_view result);

}  // namespace agentbox::agent
