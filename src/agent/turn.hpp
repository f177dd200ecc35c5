#pragma once
// One turn of Claude Code in a user's box, from the prepared request to the last byte of the
// answer (api/agent.hpp has the routes): the run's stream-json lines rendered as OpenAI chunks
// or as agentbox's native events, the chat's session remembered, and the files the turn made in
// the chat directory offered as signed download links at the end.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accounts/directory.hpp"
#include "agent/chat_queue.hpp"
#include "agent/claude_runner.hpp"
#include "box/box_spec.hpp"
#include "fs/home_path.hpp"
#include "http/offload.hpp"
#include "http/response_writer.hpp"
#include "http/signed_links.hpp"
#include "store/chat_sessions.hpp"

namespace agentbox::agent {

struct TurnOptions {
  std::string model_id = "claude-code";        // what /v1/models lists and requests name
  std::string claude_model;                    // --model; empty: the CLI's default
  int max_turns = 0;                           // --max-turns; 0: the CLI's default
  std::optional<int> max_retries;              // CLAUDE_CODE_MAX_RETRIES; unset: the CLI's
  std::vector<std::string> allowed_tools;      // --allowedTools; empty: all (the box is the sandbox)
  std::vector<std::string> extra_args;         // more CLI flags
  size_t max_attachment_bytes = 20 << 20;      // each image a request carries
  uint64_t max_artifact_bytes = 100ull << 20;  // larger files the turn made get no link
  size_t max_artifacts = 20;                   // links per turn
  std::chrono::seconds link_ttl{7 * 24 * 3600};
  std::string public_url;  // links start with this; empty: http://<the address the
                           // request arrived at> (Request::local_address), never Host
  std::string network;     // the box's network, for the system prompt (per user: below)
  std::function<std::string(const std::string& user, const std::string& profile)> network_of;
  std::string unavailable;  // why turns cannot run here (no CLI, no credential): 503 with it
  // Open WebUI's background tasks (api/agent_tasks.hpp): one plain Messages call each.
  std::string task_model = "claude-haiku-4-5";  // [agent] task_model
  int task_max_tokens = 1024;                   // a title, tags, follow-ups: short
  std::chrono::milliseconds task_timeout{60'000};
  // One run per chat (agent/chat_queue.hpp): turns that may wait for a chat's running turn.
  std::size_t queued_turns_per_chat = 4;  // [agent] queued_turns_per_chat; one more: 429
  bool warm = true;                       // chats keep warm CLIs (claude-code-ask needs one to ask on)
};

// A file of the chat directory as it was: what tells a changed file from an untouched one.
struct FileState {
  uint64_t size = 0;
  double modified = 0;
  bool operator==(const FileState&) const = default;
};
using Snapshot = std::map<std::string, FileState>;  // path relative to the chat directory

// The files of the chat directory `dir` (at most a few hundred), to compare after the turn.
Snapshot snapshot(const accounts::Caller& caller, const HomePath& dir);

enum class TurnMode { openai_stream, openai_whole, native };

struct TurnSetup {
  TurnMode mode = TurnMode::openai_whole;
  accounts::Caller caller;
  BoxSpec box;
  std::string chat;  // "" for one-shot
  HomePath dir;      // the chat directory
  Snapshot before;
  agent::ClaudeTurn claude;
  std::string model_name;  // as the client asked
  std::string base_url;    // for links
};

// Starts the turn: it answers through writer (streamed or whole, as setup.mode says) and lives
// as long as the run or the client needs it. Its last step (the chat directory compared) runs
// on pool. hold: its chat, held until the turn is over (its answer's last byte handed to the
// writer), then the chat's next turn starts; null for a one-shot turn.
void start_turn(TurnSetup setup, ClaudeRunner& runner, ChatSessions& chats,
                std::shared_ptr<const http::SignedLinks> links, std::shared_ptr<FairPool> pool,
                const TurnOptions& options, std::shared_ptr<http::ResponseWriter> writer,
                std::shared_ptr<ChatQueue::Hold> hold = nullptr);

}  // namespace agentbox::agent
