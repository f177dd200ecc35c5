#pragma once
// What the inference gateway (net/inference_gateway.hpp) forwards with the operator's
// credential: the model API the Claude Code CLI uses, and nothing else that credential opens
// (the OAuth endpoints, e.g. /api/oauth/claude_cli/create_api_key, which mints an API key; the
// Files and Message Batches APIs, which hold the whole workspace's uploads and results).
//
// The routes are one table of data below. A request matches a route by its exact method and
// path; a path is never normalised into one. Before matching, the target must be plain:
//   - the path holds only letters, digits, "-", ".", "_", "~" and "/": no percent-encoding at
//     all, so no encoding of any case or depth can hide a dot segment or a slash, and no "\"
//     or ";" that a server behind the upstream might read as a separator;
//   - no empty, "." or ".." segment;
//   - the query names only what the route lists, each value of the same plain characters.
// Anything else is refused with a one-line reason (the session answers 403 and logs it).
#include <array>
#include <string>
#include <string_view>

namespace agentbox::net {

struct GatewayRoute {
  std::string_view method;                // exactly, e.g. "POST"
  std::string_view path;                  // exactly
  std::array<std::string_view, 4> query;  // the names its query may hold (empty: unused)
  bool spends_tokens;                     // a budget reserves its worst case before forwarding
};

// What the pinned CLI (2.1.197) sends to ANTHROPIC_BASE_URL, run in a box against
// tests/fakes/fake_anthropic.py through the gateway: POST /v1/messages?beta=true for every turn,
// tool turn and side request (-p, stream-json in and out, partial messages, with and without
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC). Its SDK also counts tokens, and it lists models
// when CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY is set (GET /v1/models?limit=1000).
inline constexpr std::array<GatewayRoute, 3> kGatewayRoutes = {{
    {"POST", "/v1/messages", {"beta"}, true},
    {"POST", "/v1/messages/count_tokens", {"beta"}, false},
    {"GET", "/v1/models", {"beta", "limit", "after_id", "before_id"}, false},
}};

struct RouteMatch {
  const GatewayRoute* route = nullptr;  // null: refused
  std::string refusal;                  // why not, when refused ("agentbox: ...")
};

// method: the request line's method as sent; target: its origin-form target.
RouteMatch match_gateway_route(std::string_view method, std::string_view target);

}  // namespace agentbox::net
