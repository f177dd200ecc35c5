#pragma once
// The caller's Claude Code sessions, read from the transcripts the CLI keeps in their home
// (~/.claude/projects/*/<id>.jsonl, agent/transcript.hpp), through the confined file layer:
//   GET /agent/sessions        newest first: id, the chat directory it ran in, a title (its
//                              first prompt), modified, size
//   GET /agent/sessions/{id}   one transcript as JSON messages; ?format=markdown renders it as
//                              the chat it was, for people (agent/transcript_markdown)
// A session of another user is not found: only the caller's home is read.
#include <memory>

#include "accounts/directory.hpp"
#include "http/offload.hpp"
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
void add_agent_session_routes(Router& router, const Services& services);

}  // namespace agentbox::api
