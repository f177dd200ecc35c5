#include "cli/run_options.hpp"

namespace agentbox::cli {

void add_box_options(CLI::App& app, RunOptions& o) {
  app.add_option("--home", o.home, "Host directory shown as the box's home (default ~/.agentbox-home)");
  app.add_option("--bind", o.binds, "Make SRC[:DST] visible read-write")->type_name("SRC[:DST]");
  app.add_option("--ro-bind", o.ro_binds, "Make SRC[:DST] visible read-only")->type_name("SRC[:DST]");
  app.add_option("--memory", o.memory, "Memory limit, e.g. 2G")->type_name("SIZE");
  app.add_option("--pids", o.pids, "Process/thread limit")->type_name("N");
  app.add_option("--cpu", o.cpu, "CPU limit in cores, e.g. 1.5 or 500m")->type_name("CORES");
  app.add_option("--ptys", o.ptys, "Pseudo-terminals the box may hold (default 256)")->type_name("N");
  app.add_option("--tcp-memory", o.tcp_memory, "Socket buffer limit of the box's TCP, e.g. 64M (cgroup v1)")
      ->type_name("SIZE");
  app.add_option("--net", o.net, "Network: none (only loopback inside the box; see --allow-net)")->type_name("MODE");
  app.add_option("--allow-net", o.net_flags.allow_net,
                 "Let the box reach HOST (host, host:port, * wildcards) through an egress proxy; repeatable")
      ->type_name("HOST[,HOST...]");
  app.add_option("--allow-address", o.net_flags.allow_addresses,
                 "With --allow-net: also let it reach this private/loopback/link-local range")
      ->type_name("CIDR[,CIDR...]");
  app.add_option("--add-host", o.net_flags.add_hosts, "With --allow-net: resolve NAME to ADDRESS (before DNS)")
      ->type_name("NAME=ADDRESS");
  app.add_option("--env", o.env, "Set KEY=VALUE inside the box")->type_name("KEY=VALUE");
  app.add_option("--pass-env", o.pass_env, "Pass the caller's variable NAME through")->type_name("NAME");
  app.add_option("--profile", o.profile, "Profile file (default ~/.config/agentbox/run.toml)");
  app.add_flag("--no-profile", o.no_profile, "Ignore the profile file");
}

void add_run_options(CLI::App& run, RunOptions& o) {
  run.add_flag("--shell", o.shell, "Start a login shell instead of a command");
  add_box_options(run, o);
  run.add_flag("--cwd", o.cwd, "Bind the current directory read-write and start there");
  run.add_option("command", o.command, "The command and its arguments, after --");
}

}  // namespace agentbox::cli
