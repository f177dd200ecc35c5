#pragma once
// The most tokens a Messages API request can spend, read from its body before the gateway
// forwards it (a daily budget reserves this much while the request is in flight;
// net/gateway_session.cpp):
//
//   output: the top-level max_tokens (the API stops there; thinking counts in it). Required,
//     once, as a whole number: the upstream must read the same value the budget did.
//   input:  the body's size in bytes plus kPromptAllowance. Text costs at most one token per
//     byte (a token is at least one byte of what it encodes, and JSON only adds bytes), and
//     cached input is sent again in the body, so cache reads and writes are inside it too.
//     kPromptAllowance covers what the API adds that the body does not hold: the tool-use
//     system prompt (346 tokens on current models, 530 on older ones); role markers are
//     fewer tokens than the JSON around each message has bytes.
//     Some content costs more tokens than bytes: an image (up to ~1,600 tokens from a few
//     hundred bytes of PNG, or from a URL), a PDF (every page also as an image), server
//     tools (web search results enter as input), MCP servers the API reaches. A body with
//     anything but the kinds known to be text (kTextBlockTypes, kTextRootKeys, tools of type
//     "custom") is bounded by context_tokens instead, the most input one request can carry.
//
// The body is read with nlohmann's SAX parser (no document is built): an invalid body, or one
// nested deeper than kMaxDepth, is refused as the upstream would refuse it.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentbox::net {

inline constexpr uint64_t kPromptAllowance = 1024;
// Content blocks (in system, messages[].content and a tool_result's content) whose tokens
// their bytes bound.
inline constexpr std::array<std::string_view, 5> kTextBlockTypes = {"text", "tool_use", "tool_result", "thinking",
                                                                    "redacted_thinking"};
// Top-level fields that add no input beyond their bytes and the allowance (the others may:
// mcp_servers, container, features to come). The pinned CLI sends model, messages, system,
// tools, metadata, max_tokens, thinking, context_management, output_config (effort; a JSON
// schema for a title, which is in the body) and stream.
inline constexpr std::array<std::string_view, 16> kTextRootKeys = {
    "model",          "messages",    "system",      "max_tokens",   "metadata",
    "stop_sequences", "stream",      "temperature", "top_k",        "top_p",
    "tools",          "tool_choice", "thinking",    "service_tier", "context_management",
    "output_config"};
inline constexpr size_t kMaxDepth = 64;

struct WorstCase {
  uint64_t output = 0;      // max_tokens
  uint64_t input = 0;       // the bound on input tokens (all four kinds together)
  std::string input_bound;  // what bounds input: "the body's size", or why context_tokens does
  uint64_t total() const { return output + input < output ? UINT64_MAX : output + input; }
};

struct WorstCaseScan {
  std::optional<WorstCase> worst;  // nullopt: refused
  std::string refusal;             // why, for the box (the session answers 400)
};

WorstCaseScan worst_case_tokens(std::string_view body, uint64_t context_tokens);

}  // namespace agentbox::net
