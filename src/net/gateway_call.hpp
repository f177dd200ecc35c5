#pragma once
// A model request the daemon makes itself on an account's behalf (an Open WebUI background
// task answered without an agent run, api/agent_tasks.hpp). It enters the inference gateway as
// a box's request does, over a socketpair instead of a socket in the box's namespace, so the
// operator's credential, the upstream connection, the daily budget, the token ledger and the
// network log treat it exactly as the box's own: no second HTTP client to the upstream.
//
// Runs on: call_gateway() from any thread; the gateway's session and this exchange run on the
// box loop, each on a strand; `done` runs there once.
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "net/inference_gateway.hpp"

namespace agentbox::net {

struct GatewayAnswer {
  unsigned status = 0;  // 0: no answer (error says why)
  std::string body;     // the answer's body (the upstream's, or the gateway's own error)
  std::string error;
};

struct GatewayCall {
  std::string account;  // BoxAccount::account: the ledger's and the log's key
  std::string user;     // the external user id
  std::string target = "/v1/messages";
  std::string body;  // JSON
  std::chrono::milliseconds timeout{60'000};
  size_t answer_limit = 4 << 20;  // bytes of answer body read; more is an error
};

void call_gateway(boost::asio::io_context& io, std::shared_ptr<GatewayContext> context, GatewayCall call,
                  std::function<void(GatewayAnswer)> done);

}  // namespace agentbox::net
