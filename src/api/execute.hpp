#pragma once
// /execute: run_command, list_processes, get_process_status, send_process_input, kill_process
// (API.md Part A) and the live stream GET /execute/{id}/stream (Part B). Long-polls and the
// stream wait inside exec::ProcessTable; no io thread blocks.
#include "accounts/directory.hpp"
#include "exec/account_boxes.hpp"
#include "exec/process_table.hpp"
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct ExecuteRoutesOptions {
  std::chrono::seconds stream_keepalive{15};  // SSE comment sent after this much silence
};

struct Services;
void add_execute_routes(Router& router, const Services& services);

// The process object of API.md, as JSON.
nlohmann::json process_json(const exec::ProcessView& view);

}  // namespace agentbox::api
