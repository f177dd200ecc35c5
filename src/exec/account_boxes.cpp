#include "exec/account_boxes.hpp"

#include <filesystem>

#include "box/agent_paths.hpp"
#include "box/box_env.hpp"
#include "exec/plain_command.hpp"

namespace agentbox::exec {

AccountBoxes::AccountBoxes(BoxManager& manager, std::string state_dir, Limits limits, DaemonPorts ports,
                           AgentMounts agent)
    : manager_(manager), state_dir_(std::move(state_dir)), limits_(limits), ports_(ports), agent_(std::move(agent)) {}

BoxSpec AccountBoxes::spec_for(const Account& account, const BoxPlace& place) const {
  BoxSpec spec;
  spec.name = place.key.empty() ? account.name : place.key;
  if (spec.name != account.name) spec.login = account.name;
  spec.hostname = "agentbox";
  spec.uid = account.uid;
  spec.gid = account.gid;
  spec.identity = IdentityMode::host_uid;
  spec.home_source = place.home_source.empty() ? state_dir_ + "/" + account.home_dir : place.home_source;
  spec.home_target = "/home/" + account.name;
  spec.limits = limits_;
  if (file_size_of_) spec.limits.file_size = file_size_of_(account);
  spec.use_cgroup = true;
  spec.egress_proxy_port = ports_.egress_proxy;
  spec.inference_port = ports_.inference;
  // Read-only, and the file itself: a 245 MB binary is shown, never copied, and no box can
  // change what another runs.
  if (!agent_.claude.empty()) spec.binds.push_back({agent_.claude, kClaudeInBox, /*writable=*/false});
  if (!agent_.skills_dir.empty()) spec.binds.push_back({agent_.skills_dir, kManagedSkillsInBox, /*writable=*/false});
  if (run_shape_) {
    spec.binds.insert(spec.binds.end(), run_shape_->binds.begin(), run_shape_->binds.end());
    spec.limits = run_shape_->limits;
    spec.use_cgroup = run_shape_->use_cgroup;
    if (run_shape_->identity == IdentityMode::user_ns) {
      // An ordinary user's: run's own user namespace (the caller's ids mapped as run maps
      // them), and the run home itself, which it cannot bind over the account's.
      spec.identity = IdentityMode::user_ns;
      spec.gid = run_shape_->gid;
      spec.outer_uid = run_shape_->outer_uid;
      spec.outer_gid = run_shape_->outer_gid;
      spec.home_source = run_shape_->home_source;
    }
  }
  if (!place.profile.empty() && profile_shape_) profile_shape_(spec, place.profile);
  return spec;
}

void AccountBoxes::set_run_env(SpawnRequest& req) const {
  for (const auto& set : run_env_) {
    const std::string prefix = set.first + "=";
    std::erase_if(req.env, [&prefix](const std::string& kv) { return kv.starts_with(prefix); });
    req.env.push_back(prefix + set.second);
  }
}

uint64_t AccountBoxes::spawn(const BoxSpec& spec, SpawnRequest req, std::vector<UniqueFd> stdio,
                             SpawnHandlers handlers) {
  set_run_env(req);
  return manager_.spawn(spec.name, spec, std::move(req), std::move(stdio), std::move(handlers));
}

void AccountBoxes::signal(const std::string& account, uint64_t id, int sig) { manager_.signal(account, id, sig); }

uint64_t AccountBoxes::spawn_terminal(const BoxSpec& spec, SpawnRequest req, SpawnHandlers handlers) {
  set_run_env(req);
  return manager_.spawn(spec.name, spec, std::move(req), {}, std::move(handlers));
}

void AccountBoxes::signal_session(const std::string& account, uint64_t id, int sig, std::function<void(bool)> done) {
  manager_.signal(account, id, sig, std::move(done), /*whole_session=*/true);
}

void AccountBoxes::list_ports(const std::string& account, std::function<void(std::vector<ListeningPort>)> done) {
  // The daemon's listeners are held by no process of the box: not the user's.
  manager_.list_ports(account, [daemon = ports_, done = std::move(done)](std::vector<ListeningPort> ports) {
    std::erase_if(ports, [daemon](const ListeningPort& p) {
      return p.pid == 0 && p.port != 0 && (p.port == daemon.egress_proxy || p.port == daemon.inference);
    });
    done(std::move(ports));
  });
}

void AccountBoxes::open_socket_in_box(const std::string& account, int family,
                                      std::function<void(UniqueFd, std::string)> done) {
  manager_.open_socket_in_box(account, family, std::move(done));
}

SpawnRequest shell_spawn_request(const BoxSpec& spec, const ShellCommand& command) {
  auto env = base_env(spec, command.tty);
  env["PWD"] = command.cwd;
  for (const auto& [k, v] : command.env) env[k] = v;

  SpawnRequest req;
  std::vector<std::string> shell_argv = {spec.shell, "-c", command.command};
  // bash's builtin list decides what needs it; another shell always runs the command.
  auto words =
      std::filesystem::path(spec.shell).filename() == "bash" ? plain_command_words(command.command, env) : std::nullopt;
  if (words) {
    req.argv = std::move(*words);
    req.shell_fallback = std::move(shell_argv);
  } else {
    req.argv = std::move(shell_argv);
  }
  req.env = env_strings(env);
  req.cwd = command.cwd;
  req.tty = command.tty;
  return req;
}

}  // namespace agentbox::exec
