#include "box/box_env.hpp"

#include "box/agent_paths.hpp"

namespace agentbox {

std::map<std::string, std::string> base_env(const BoxSpec& spec, bool tty) {
  std::map<std::string, std::string> env = {
      {"HOME", spec.home_target}, {"USER", login_name(spec)}, {"LOGNAME", login_name(spec)},
      {"SHELL", spec.shell},      {"PATH", kBoxPath},         {"LANG", "C.UTF-8"}};
  if (tty) env["TERM"] = "xterm-256color";
  if (has_claude_code(spec)) {
    // First, so the configured CLI wins over one the host may have in /usr/local/bin. Its
    // update checks, telemetry and error reports would only knock on the egress proxy.
    env["PATH"] = std::string(kAgentBinDir) + ":" + kBoxPath;
    env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1";
  }
  if (spec.egress_proxy_port) {
    // Both spellings: curl reads the lower-case ones, many others the upper-case. The box's own
    // loopback stays direct (its servers, /proxy's dev servers).
    const std::string proxy = "http://127.0.0.1:" + std::to_string(spec.egress_proxy_port);
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) env[name] = proxy;
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1";
  }
  if (spec.inference_port) {
    env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:" + std::to_string(spec.inference_port);
    env["ANTHROPIC_API_KEY"] = kInferencePlaceholderKey;
  }
  return env;
}

std::vector<std::string> env_strings(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace agentbox
