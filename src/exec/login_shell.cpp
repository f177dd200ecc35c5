// login_shell_request (exec/terminals.hpp): the spawn request of a terminal's login shell.
#include "box/box_env.hpp"
#include "exec/terminals.hpp"

namespace agentbox::exec {

SpawnRequest login_shell_request(const BoxSpec& spec, const std::string& cwd, uint16_t cols, uint16_t rows) {
  auto env = base_env(spec, /*tty=*/true);
  env["TERM"] = "xterm-256color";
  env["PWD"] = cwd;
  SpawnRequest req;
  req.argv = {spec.shell, "-l"};
  req.env = env_strings(env);
  req.cwd = cwd;
  req.tty = true;
  req.cols = cols;
  req.rows = rows;
  return req;
}

}  // namespace agentbox::exec
