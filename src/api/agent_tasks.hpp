#pragma once
// Open WebUI's background tasks on POST /v1/chat/completions (agent/background_task.hpp tells
// them from chat turns), answered without an agent run: no CLI, no box, no chat directory, no
// chat session touched, and no wait for the chat's turn. One plain Messages API call with
// `[agent] task_model` (no tools, task_max_tokens) goes through the model gateway as the
// account's (net/gateway_call.hpp: the operator's credential, the budget, the token ledger);
// its text is the answer, in OpenAI's chat.completion shape, streamed when asked. Without a
// model credential, or when the call fails, the answer is a short reply of the shape the task
// asks for (agent::fallback_reply), never an error: a task is background work.
//
// Runs on: answer_task() on a pool thread (the caller is resolved there); the gateway call on
// the box loop, which completes the writer.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>

#include "accounts/directory.hpp"
#include "agent/background_task.hpp"
#include "agent/turn.hpp"
#include "http/request.hpp"
#include "http/response_writer.hpp"

namespace agentbox::net {
class InferenceGateway;
}

namespace agentbox::api {

// model: the model name the answer carries (as the client asked). gateway: null without a
// model credential.
void answer_task(const http::Request& req, const nlohmann::json& body, const agent::BackgroundTask& task,
                 const std::string& model, accounts::AccountDirectory& callers, net::InferenceGateway* gateway,
                 const agent::TurnOptions& options, std::shared_ptr<http::ResponseWriter> writer);

}  // namespace agentbox::api
