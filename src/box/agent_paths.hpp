#pragma once
// Where Claude Code sits in a box (DESIGN §7). The host's CLI is bound read-only at kClaudeInBox
// and kAgentBinDir goes first on PATH; the operator's skills are bound read-only at
// kManagedSkillsInBox. Every box's /etc holds the symlink claude-code -> kClaudeManagedDir, the
// CLI's managed ("policy") directory on Linux (/etc/claude-code): it loads the skills it finds
// in .claude/skills there beside the user's own ~/.claude/skills, whoever starts it (a pipe
// through /execute, a terminal, the native route). Both live on the box's root, never under a
// host directory the box shows (/opt is the host's, read-only, and has no room for a mount point).
#include <algorithm>

#include "box/box_spec.hpp"

namespace agentbox {

inline constexpr const char* kAgentBinDir = "/agentbox/bin";
inline constexpr const char* kClaudeInBox = "/agentbox/bin/claude";
inline constexpr const char* kClaudeManagedDir = "/agentbox/claude-code";
inline constexpr const char* kManagedSkillsInBox = "/agentbox/claude-code/.claude/skills";
// The name in the box's /etc that points at kClaudeManagedDir.
inline constexpr const char* kEtcClaudeCode = "claude-code";

// The box has Claude Code: its spec binds the CLI.
inline bool has_claude_code(const BoxSpec& spec) {
  return std::any_of(spec.binds.begin(), spec.binds.end(), [](const BindMount& b) { return b.target == kClaudeInBox; });
}

}  // namespace agentbox
