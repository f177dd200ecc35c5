#include "box/box_env.hpp"

namespace agentbox {

std::map<std::string, std::string> base_env(const BoxSpec& spec, bool tty) {
  std::map<std::string, std::string> env = {
      {"HOME", spec.home_target}, {"USER", spec.name}, {"LOGNAME", spec.name},
      {"SHELL", spec.shell},      {"PATH", kBoxPath},  {"LANG", "C.UTF-8"}};
  if (tty) env["TERM"] = "xterm-256color";
  return env;
}

std::vector<std::string> env_strings(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace agentbox
