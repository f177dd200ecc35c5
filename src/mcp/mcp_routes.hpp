#pragma once
// /mcp: agentbox as an MCP server over Streamable HTTP. POST carries one JSON-RPC message. In
// the 2025 era (2025-11-25, also 2025-06-18 and 2025-03-26) initialize opens a session
// (Mcp-Session-Id) that belongs to the user who opened it; ping, tools/list and tools/call need
// it; notifications and responses are accepted (202); DELETE ends a session. A request of the
// modern era (2026-07-28, mcp/revisions.hpp) needs no session: server/discover, ping,
// tools/list, tools/call, each with its revision in _meta.
// GET is 405: the server sends nothing unasked. The key and the user are the REST API's
// (the Bearer key, X-User-Id or X-OpenWebUI-User-Id), the chat's X-Session-Id scopes the cwd.
//
// The methods themselves are transport-neutral (mcp/dispatch.hpp, shared with stdio); this file
// is what HTTP adds: sessions, statuses, JSON or SSE answers.
//
// Runs on: the io thread (the handlers); tool answers complete on the routes' threads.
#include <cstdint>

#include "api/services.hpp"
#include "http/router.hpp"

namespace agentbox::mcp {

// The largest JSON-RPC message accepted (a write_file's content included): bytes.
inline constexpr std::uint64_t kMessageLimit = 16ull << 20;

void add_mcp_routes(http::Router& router, const api::Services& services);

}  // namespace agentbox::mcp
