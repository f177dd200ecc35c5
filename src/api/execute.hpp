#pragma once
// /execute: run_command, list_processes, get_process_status, send_process_input, kill_process
// (API.md Part A) and the live stream GET /execute/{id}/stream (Part B). Long-polls and the
// stream wait inside exec::ProcessTable; no io thread blocks.
//
// Each route checks its request whole (400, 413, 422) before it resolves its caller, and only
// then touches a box: a malformed request makes no account, volume or box (the checks are
// tested without any: tests/unit/api_execute_test.cpp). A request naming no user is a 400 first.
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
// Uses services.callers at once; services.boxes and .processes only for requests past their checks.
void add_execute_routes(Router& router, const Services& services);

// The process object of API.md, as JSON.
nlohmann::json process_json(const exec::ProcessView& view);

}  // namespace agentbox::api
