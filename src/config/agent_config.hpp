#pragma once
// The [agent] keys of the server config (DESIGN §7): Claude Code in every box.
//
//   [agent]
//   claude = "/opt/claude-code/node_modules/.bin/claude"  # the CLI on the host; default: the
//                                                         # project's install (deps/claude-code)
//   skills_dir = "/srv/agentbox/skills"                   # NAME/SKILL.md (+ files); default none
//   model = "sonnet"                  # the claude-code model's --model; default: the CLI's
//   max_turns = 30                    # --max-turns; default: the CLI's
//   max_retries = 2                   # upstream retries of a turn; default: the CLI's (minutes on 529)
//   allowed_tools = ["Read", "Bash"]  # only these tools; default: all (the box is the sandbox)
//   public_url = "https://agentbox.example.com"  # links to a turn's files; default: Host header
//   link_days = 7                     # how long those links work
//   task_model = "claude-haiku-4-5"   # Open WebUI's background tasks (titles, tags, follow-ups):
//                                     # one plain Messages call each, no agent (api/agent_tasks.hpp)
//   queued_turns_per_chat = 4         # turns that may wait for a chat's running turn; one more: 429
//   warm_idle = 300                   # seconds a chat's Claude Code CLI stays between turns; 0: none
//   warm_per_account = 2              # warm CLIs an account keeps (least recently used end); 0: none
//   approval_timeout = 600            # seconds claude-code-ask's question waits for its answer (then denied)
//
// Relative paths in a file are the file's directory's. A claude that is not there means no agent
// (said once in the log and by `agentbox doctor`), never a daemon that does not start.
#include <toml++/toml.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox {

struct AgentConfig {
  std::optional<std::string> claude;            // unset: the first of default_claude_paths() that exists
  std::optional<std::string> skills_dir;        // unset: no operator skills
  std::string model;                            // --model for claude-code; "": the CLI's default
  int max_turns = 0;                            // --max-turns; 0: the CLI's default
  std::optional<int> max_retries;               // CLAUDE_CODE_MAX_RETRIES of agent turns; unset: the CLI's
  std::vector<std::string> allowed_tools;       // only these tools; empty: all (the box is the sandbox)
  std::string public_url;                       // download links start with it; "": the request's Host
  int link_days = 7;                            // download links of a turn's files work this long
  std::string task_model = "claude-haiku-4-5";  // answers Open WebUI's background tasks
  int queued_turns_per_chat = 4;                // turns waiting for a chat's running turn (0..64)
  int warm_idle = 300;                          // seconds an idle chat CLI stays (0..86400; 0: not kept)
  int warm_per_account = 2;                     // warm CLIs per account (0..64; 0: not kept)
  int approval_timeout = 600;                   // seconds an ask-mode question waits (1..86400; then denied)
};

inline constexpr std::array<std::string_view, 1> kAgentSections = {"agent"};

// Stores one key the walker found under [agent]; false for a key that is not one of ours.
// Throws Error saying what is wrong with the value.
bool apply_agent_key(AgentConfig& config, std::string_view key, const toml::node& value);

// Makes the configured paths absolute against base (the config file's directory).
void resolve_agent_paths(AgentConfig& config, const std::string& base);

// Where the project's install script puts the CLI: deps/claude-code beside the build directory
// the running binary sits in, then under the source tree the binary was built from.
std::vector<std::string> default_claude_paths();

// The claude executable the boxes get: the configured (or default) path with its symlinks
// resolved (boxes bind the file itself), a regular executable file. nullopt with *why set when
// there is none: then there is no agent.
std::optional<std::string> find_claude(const AgentConfig& config, std::string* why);

// The skills directory as a real path, or nullopt when none is configured. Throws Error when
// one is configured but is not a directory (a typo must not silently give no skills).
std::optional<std::string> find_skills_dir(const AgentConfig& config);

}  // namespace agentbox
