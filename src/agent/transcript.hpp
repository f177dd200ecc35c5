#pragma once
// Claude Code's session transcripts: ~/.claude/projects/<cwd, dashed>/<session id>.jsonl in the
// user's home, one JSON object per line. The lines that are the conversation have type "user"
// or "assistant" and a Messages API `message` {role, content}; others (queue operations,
// attachments, summaries, subagent sidechains) are bookkeeping and left out. Unknown keys and
// types are ignored; a line that is not JSON is skipped and counted. Pure: the caller reads.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace agentbox::agent {

struct TranscriptMessage {
  std::string role;        // "user" or "assistant"
  nlohmann::json content;  // as the API has it: a string or a list of blocks
  std::string timestamp;   // ISO 8601, as written
  std::string uuid;
  std::string model;       // assistant: the model that wrote it ("<synthetic>" for the CLI's own)
  bool meta = false;       // isMeta: a line the CLI adds for the model, never typed by anyone
  bool api_error = false;  // isApiErrorMessage: the CLI's text for a failed API call
};

struct Transcript {
  std::string session_id;
  std::string cwd;           // where the session ran (its chat directory)
  std::string first_prompt;  // the first user text: a title for listings
  std::vector<TranscriptMessage> messages;
  size_t skipped_lines = 0;  // not JSON (a torn last line while the CLI writes)
};

Transcript parse_transcript(std::string_view jsonl);

// True for a session id as the CLI makes them (a UUID): what may name a transcript file.
bool is_session_id(std::string_view id);

}  // namespace agentbox::agent
