#pragma once
// Claude Code as an OpenAI-compatible model (API.md Part B, DESIGN §7):
//   GET /v1/models                the one model, `claude-code`
//   POST /v1/chat/completions     a turn of Claude Code in the caller's box, streamed or whole
//   POST /agent/runs              the same turn as SSE of the CLI's own stream-json lines plus
//                                 agentbox's events (artifact, exit)
// The user is X-User-Id or X-OpenWebUI-User-Id; the chat is X-OpenWebUI-Chat-Id or
// X-Session-Id (else the turn is one-shot). A chat's turns run in ~/chats/<chat> and resume
// the chat's Claude session (store/chat_sessions.hpp), one at a time: a turn of a chat whose
// turn before still runs waits for it (agent/chat_queue.hpp; too many waiting: 429). Files the
// turn created or changed there come back as download links signed for this user and path
// (http/signed_links.hpp). Open WebUI's background tasks (a title, tags, follow-ups) sent to
// /v1/chat/completions run no turn: api/agent_tasks.hpp answers them with one plain model call.
// Errors under /v1 are OpenAI-shaped (api/openai_errors.hpp).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accounts/directory.hpp"
#include "agent/claude_runner.hpp"
#include "agent/turn.hpp"
#include "exec/account_boxes.hpp"
#include "http/offload.hpp"
#include "http/router.hpp"
#include "http/signed_links.hpp"
#include "store/chat_sessions.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

// The agent's configuration (agent/turn.hpp), which the routes read too.
using AgentRoutesOptions = agent::TurnOptions;

struct Services;
void add_agent_routes(Router& router, const Services& services);

}  // namespace agentbox::api
