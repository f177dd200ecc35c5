#include "config/agent_config.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "config/toml_schema.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"

namespace agentbox {

namespace {

constexpr const char* kInstalledClaude = "deps/claude-code/node_modules/.bin/claude";

std::string nonempty_path(const toml::node& value) {
  std::string path = toml_string(value);
  if (path.empty()) throw Error("empty path");
  return path;
}

std::string absolute_against(const std::string& path, const std::string& base) {
  namespace fs = std::filesystem;
  if (path.front() == '/' || base.empty()) return fs::path(path).lexically_normal().string();
  return (fs::path(base) / path).lexically_normal().string();
}

}  // namespace

bool apply_agent_key(AgentConfig& config, std::string_view key, const toml::node& value) {
  if (key == "agent.claude")
    config.claude = nonempty_path(value);
  else if (key == "agent.skills_dir")
    config.skills_dir = nonempty_path(value);
  else if (key == "agent.model")
    config.model = toml_string(value);
  else if (key == "agent.max_retries")
    config.max_retries = static_cast<int>(toml_integer(value, 0, 100));
  else if (key == "agent.max_turns")
    config.max_turns = static_cast<int>(toml_integer(value, 0, 1000));
  else if (key == "agent.allowed_tools")
    config.allowed_tools = toml_strings(value);
  else if (key == "agent.public_url") {
    config.public_url = toml_string(value);
    if (!config.public_url.starts_with("http://") && !config.public_url.starts_with("https://"))
      throw Error("must start with http:// or https://");
    while (config.public_url.ends_with('/')) config.public_url.pop_back();
  } else if (key == "agent.link_days")
    config.link_days = static_cast<int>(toml_integer(value, 1, 365));
  else if (key == "agent.task_model") {
    config.task_model = toml_string(value);
    if (config.task_model.empty()) throw Error("must name a model");
  } else if (key == "agent.queued_turns_per_chat")
    config.queued_turns_per_chat = static_cast<int>(toml_integer(value, 0, 64));
  else if (key == "agent.warm_idle")
    config.warm_idle = static_cast<int>(toml_integer(value, 0, 86400));
  else if (key == "agent.warm_per_account")
    config.warm_per_account = static_cast<int>(toml_integer(value, 0, 64));
  else if (key == "agent.approval_timeout")
    config.approval_timeout = static_cast<int>(toml_integer(value, 1, 86400));
  else
    return false;
  return true;
}

void resolve_agent_paths(AgentConfig& config, const std::string& base) {
  if (config.claude) config.claude = absolute_against(*config.claude, base);
  if (config.skills_dir) config.skills_dir = absolute_against(*config.skills_dir, base);
}

std::vector<std::string> default_claude_paths() {
  std::vector<std::string> paths;
  // build/agentbox -> build/../deps/...: a checkout's own build, wherever it was moved.
  if (std::string self_dir = path_next_to_self(""); !self_dir.empty())
    paths.push_back(absolute_against(std::string("../") + kInstalledClaude, self_dir));
#ifdef AGENTBOX_SOURCE_DIR
  std::string in_source = std::string(AGENTBOX_SOURCE_DIR) + "/" + kInstalledClaude;
  if (paths.empty() || paths.front() != in_source) paths.push_back(in_source);
#endif
  return paths;
}

std::optional<std::string> find_claude(const AgentConfig& config, std::string* why) {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates =
      config.claude ? std::vector<std::string>{*config.claude} : default_claude_paths();
  std::string tried;
  for (const std::string& candidate : candidates) {
    std::error_code ec;
    fs::path real = fs::canonical(candidate, ec);
    struct stat st {};
    if (!ec && ::stat(real.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(real.c_str(), X_OK) == 0)
      return real.string();
    if (!tried.empty()) tried += ", ";
    tried += candidate;
  }
  if (why) {
    *why = config.claude
               ? "[agent] claude " + tried + " is not an executable file"
               : "no Claude Code CLI at " + tried + " (scripts/install-deps.sh installs it; or set [agent] claude)";
  }
  return std::nullopt;
}

std::optional<std::string> find_skills_dir(const AgentConfig& config) {
  namespace fs = std::filesystem;
  if (!config.skills_dir) return std::nullopt;
  std::error_code ec;
  fs::path real = fs::canonical(*config.skills_dir, ec);
  if (ec || !fs::is_directory(real, ec))
    throw Error("[agent] skills_dir " + *config.skills_dir + " is not a directory");
  return real.string();
}

}  // namespace agentbox
