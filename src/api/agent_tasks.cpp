#include "api/agent_tasks.hpp"

#include <nlohmann/json.hpp>

#include <ctime>

#include "agent/sse_frames.hpp"
#include "net/gateway_call.hpp"
#include "net/inference_gateway.hpp"
#include "util/log.hpp"
#include "util/random_hex.hpp"

namespace agentbox::api {

namespace {

using nlohmann::json;

// The answer as the client asked for it: one chat.completion, or its chunks as SSE.
void send_reply(http::ResponseWriter& writer, bool stream, const std::string& model, const std::string& text,
                const json& usage) {
  const std::string id = "chatcmpl-" + random_hex(12);
  const auto created = static_cast<std::int64_t>(std::time(nullptr));
  if (!stream) {
    writer.send(http::Response::json(agent::task_completion(model, id, created, text, usage)));
    return;
  }
  http::Response head;
  head.headers.set(http::field::content_type, "text/event-stream");
  head.headers.set(http::field::cache_control, "no-cache");
  if (!writer.begin_chunked(std::move(head))) return;
  for (const json& chunk : agent::task_chunks(model, id, created, text, usage))
    writer.write_chunk(agent::sse::json_data(chunk));
  writer.write_chunk(agent::sse::done());
  writer.end_chunked();
}

}  // namespace

void answer_task(const http::Request& req, const json& body, const agent::BackgroundTask& task,
                 const std::string& model, accounts::AccountDirectory& callers, net::InferenceGateway* gateway,
                 const agent::TurnOptions& options, std::shared_ptr<http::ResponseWriter> writer) {
  const accounts::Caller caller = callers.resolve(req);  // whose usage it is; 400 without a user
  if (!gateway) return send_reply(*writer, task.stream, model, agent::fallback_reply(task, body), nullptr);

  net::GatewayCall call;
  call.account = caller.account.name;
  call.user = caller.account.external_id;
  call.body = agent::task_messages_request(body, options.task_model, options.task_max_tokens).dump();
  call.timeout = options.task_timeout;
  gateway->call(std::move(call), [writer, task, model, body, account = caller.account.name](net::GatewayAnswer a) {
    std::optional<std::string> text;
    json usage;
    if (a.status == 200) {
      json answer = json::parse(a.body, nullptr, /*allow_exceptions=*/false);
      text = agent::messages_answer_text(answer);
      if (text && answer.is_object()) usage = answer.value("usage", json());
    }
    if (!text) {
      log::warn("agent", "{}: the model did not answer background task {} ({}): answered without it", account,
                task.name, a.status ? "status " + std::to_string(a.status) + ": " + a.body.substr(0, 200) : a.error);
      text = agent::fallback_reply(task, body);
    }
    send_reply(*writer, task.stream, model, *text, usage);
  });
}

}  // namespace agentbox::api
