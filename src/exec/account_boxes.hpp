#pragma once
// The daemon's ProcessSpawner and TerminalSpawner: an account's box (BoxManager), described by the spec its
// account and the configured limits make, and the command a request's shell line becomes in it.
// ProcessTable and Terminals spawn through this; the routes ask it what an account's box is
// (the system prompt, /execute, /api/terminals), what listens in it (/ports) and for a socket
// that reaches it (/proxy).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "box/box_manager.hpp"
#include "exec/process_table.hpp"
#include "exec/terminals.hpp"
#include "store/account_store.hpp"
#include "store/box_key.hpp"

namespace agentbox::exec {

// Where the daemon's own listeners sit on each box's loopback (0: that service is off).
struct DaemonPorts {
  uint16_t egress_proxy = 0;  // HTTP_PROXY
  uint16_t inference = 0;     // ANTHROPIC_BASE_URL
};

// Host paths every box shows read-only for Claude Code (box/agent_paths.hpp); empty: none.
struct AgentMounts {
  std::string claude;      // the CLI's executable file (symlinks resolved)
  std::string skills_dir;  // the operator's skills
};

class AccountBoxes : public ProcessSpawner, public TerminalSpawner {
 public:
  // state_dir holds the accounts' homes (Account::home_dir is relative to it).
  AccountBoxes(BoxManager& manager, std::string state_dir, Limits limits, DaemonPorts ports = {},
               AgentMounts agent = {});

  // The box an account gets: its name, uid, home; the configured limits; loopback-only network
  // with the egress proxy on it; Claude Code and the skills when configured. Another place
  // (store/box_key.hpp: a profile's box, a context's) is another box, keyed place.key, shaped
  // by its profile (set_profile_shape), showing place.home_source as home when set.
  BoxSpec spec_for(const Account& account, const BoxPlace& place = {}) const;
  // What a profile changes in a box (its limits, its binds): the daemon's, from the profiles
  // in force. Unset, or a profile it does not know: the box as the default's.
  using ProfileShape = std::function<void(BoxSpec& spec, std::string_view profile)>;
  void set_profile_shape(ProfileShape shape) { profile_shape_ = std::move(shape); }

  uint64_t spawn(const BoxSpec& spec, SpawnRequest req, std::vector<UniqueFd> stdio, SpawnHandlers handlers) override;
  void signal(const std::string& account, uint64_t id, int sig) override;
  uint64_t spawn_terminal(const BoxSpec& spec, SpawnRequest req, SpawnHandlers handlers) override;
  void signal_session(const std::string& account, uint64_t id, int sig, std::function<void(bool)> done) override;
  void touch(const std::string& account) { manager_.touch(account); }
  // RLIMIT_FSIZE of an account's box: its disk quota (unset: none).
  void set_file_size_limit(std::function<uint64_t(const Account&)> of) { file_size_of_ = std::move(of); }
  // `agentbox mcp`: every box shaped as `agentbox run` makes it (run's binds, limits and cgroup
  // use; for an ordinary user also its user namespace and home) and env set over each command's
  // base environment. Set before the first spawn.
  void set_run_shape(BoxSpec run, std::map<std::string, std::string> env) {
    run_shape_ = std::move(run);
    run_env_ = std::move(env);
  }

  // The TCP listeners of the account's programs in its box (not the daemon's); empty when
  // it has no box running. done runs on the box loop.
  using ListeningPort = protocol::ListeningPort;
  void list_ports(const std::string& account, std::function<void(std::vector<ListeningPort>)> done);
  // A non-blocking TCP socket of `family` made in the account's network namespace, so that a
  // connect to the loopback reaches the box's own servers and nothing else. done(fd) on another
  // thread, or done(no fd, why) when the account has no box running.
  void open_socket_in_box(const std::string& account, int family, std::function<void(UniqueFd, std::string why)> done);

 private:
  BoxManager& manager_;
  std::string state_dir_;
  Limits limits_;
  DaemonPorts ports_;
  AgentMounts agent_;
  std::function<uint64_t(const Account&)> file_size_of_;
  std::optional<BoxSpec> run_shape_;
  std::map<std::string, std::string> run_env_;
  ProfileShape profile_shape_;
  void set_run_env(SpawnRequest& req) const;
};

// What a shell command line from the API becomes in a box (POST /execute).
struct ShellCommand {
  std::string command;                     // the line, as the client sent it
  std::string cwd;                         // as the box sees it
  std::map<std::string, std::string> env;  // the request's variables, over the box's own
  bool tty = true;
};

// The spawn request: the box's base environment with PWD and the request's variables; the words
// themselves when bash would exec them directly (exec/plain_command.hpp), else SHELL -c LINE.
SpawnRequest shell_spawn_request(const BoxSpec& spec, const ShellCommand& command);

}  // namespace agentbox::exec
