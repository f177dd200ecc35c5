#pragma once
// The environment every command in a box starts from: who it is, where home is, a PATH of the
// box's own tree. Callers add what they pass through (terminal settings, request env).
#include <map>
#include <string>
#include <vector>

#include "box/box_spec.hpp"

namespace agentbox {

inline constexpr const char* kBoxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// What a box's ANTHROPIC_API_KEY holds when the daemon's inference gateway serves it: shaped
// like a key so clients accept it, worth nothing (the gateway drops it and adds the real one).
inline constexpr const char* kInferencePlaceholderKey = "sk-ant-agentbox-placeholder-the-gateway-adds-the-real-key";

// HOME, USER, LOGNAME, SHELL, PATH, LANG; TERM only for a terminal (pipes get none, so tools
// do not emit colour codes into captured output); the proxy variables when the spec has an
// egress proxy; ANTHROPIC_BASE_URL and the placeholder key when it has an inference gateway;
// with Claude Code (box/agent_paths.hpp) its directory first on PATH and
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1.
std::map<std::string, std::string> base_env(const BoxSpec& spec, bool tty);

// "K=V" strings, as SpawnRequest::env takes them.
std::vector<std::string> env_strings(const std::map<std::string, std::string>& env);

}  // namespace agentbox
