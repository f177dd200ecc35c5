#pragma once
// Claude Code as an OpenAI-compatible model (API.md Part B, DESIGN §7):
//   GET /v1/models                the one model, `claude-code`
//   POST /v1/chat/completions     a turn of Claude Code in the caller's box, streamed or whole
//   POST /agent/runs              the same turn as SSE of the CLI's own stream-json lines plus
//                                 agentbox's events (artifact, exit)
// The user is X-User-Id or X-OpenWebUI-User-Id; the chat is X-OpenWebUI-Chat-Id or
// X-Session-Id (else the turn is one-shot). A chat's turns run in ~/chats/<chat> and resume
// the chat's Claude session (store/chat_sessions.hpp). Files the turn created or changed there
// come back as download links signed for this user and path (http/signed_links.hpp).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/claude_runner.hpp"
#include "exec/account_boxes.hpp"
#include "http/offload.hpp"
#include "server/caller.hpp"
#include "http/router.hpp"
#include "http/signed_links.hpp"
#include "store/chat_sessions.hpp"

namespace agentbox::server {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct AgentRoutesOptions {
  std::string model_id = "claude-code";    // what /v1/models lists and requests name
  std::string claude_model;                // --model; empty: the CLI's default
  int max_turns = 0;                       // --max-turns; 0: the CLI's default
  std::optional<int> max_retries;          // CLAUDE_CODE_MAX_RETRIES; unset: the CLI's
  std::vector<std::string> allowed_tools;  // --allowedTools; empty: all (the box is the sandbox)
  std::vector<std::string> extra_args;     // more CLI flags
  size_t max_attachment_bytes = 20 << 20;  // each image a request carries
  uint64_t max_artifact_bytes = 100ull << 20;  // larger files the turn made get no link
  size_t max_artifacts = 20;               // links per turn
  std::chrono::seconds link_ttl{7 * 24 * 3600};
  std::string public_url;                  // links start with this; empty: http://<the address the
                                           // request arrived at> (Request::local_address), never Host
  std::string network;                     // the box's network, for the system prompt (per user: below)
  std::function<std::string(const std::string& user)> network_of;
  std::string unavailable;  // why turns cannot run here (no CLI, no credential): 503 with it
};

void add_agent_routes(Router& router, CallerDirectory& callers, exec::AccountBoxes& boxes,
                      agent::ClaudeRunner& runner, ChatSessions& chats,
                      std::shared_ptr<const SignedLinks> links, std::shared_ptr<BlockingPool> pool,
                      AgentRoutesOptions options);

}  // namespace agentbox::server
