#pragma once
// A Claude Code session (agent/transcript) as the chat it was, in Markdown for people to read
// (GET /agent/sessions/{id}?format=markdown):
//
//   # Claude Code session `ID`          a short header: chat, directory, model(s), first and
//   - ...                               last message times
//   ## User · 14:02:11                  what was typed, as Markdown
//   ## Assistant · 14:02:13             its answer as Markdown; thinking as a quoted block; each
//   <details><summary>Bash: ls</summary> tool call folded, its input and its result in fenced
//   ...</details>                       blocks (long ones cut, with a note)
//
// Lines the CLI adds for itself (isMeta, slash-command bookkeeping) are left out; a tool's
// result, which the CLI files as a user line, is shown inside its call. Text from the
// transcript cannot break out of the block that holds it (agent/markdown_text). Pure.
#include <cstddef>
#include <string>

#include "agent/transcript.hpp"

#include <nlohmann/json.hpp>

namespace agentbox::agent {

// What the route knows beyond the transcript itself.
struct TranscriptAbout {
  std::string id;                                      // the session id (a UUID, checked by the caller)
  std::string chat;                                    // the chat whose directory it ran in, "" when none
  bool truncated = false;                              // only the beginning of the file was read
  nlohmann::json approvals = nlohmann::json::array();  // ask mode's decisions (agent/approvals.hpp)
};

// How much of a tool's input or output is shown; the rest is cut with a note that says how
// much and where the whole is (the JSON form of the session).
struct MarkdownLimits {
  size_t block_bytes = 8 << 10;
  size_t block_lines = 200;
  size_t summary_chars = 120;  // of the command or path in a tool call's one-line summary
};

std::string transcript_markdown(const Transcript& t, const TranscriptAbout& about, const MarkdownLimits& limits = {});

}  // namespace agentbox::agent
