// agentbox: the command line. Subcommands: serve (the HTTP API, run by execing agentbox-serve),
// mcp (the MCP tools over stdio, agentbox-serve's too),
// run (one-shot box), doctor (host support), config check (validate a server config file),
// backup (the mirror of homes), accounts (list, delete) and keys (per-user API keys), through
// the running daemon.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/accounts_command.hpp"
#include "cli/backup_command.hpp"
#include "cli/cluster_command.hpp"
#include "cli/config_check.hpp"
#include "cli/doctor.hpp"
#include "cli/keys_command.hpp"
#include "cli/run_command.hpp"
#include "cli/run_options.hpp"
#include "cli/workspaces_command.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"

namespace {

// The subcommand the words before "--" name (the first that is not an option), "" for none.
std::string_view named_subcommand(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (!a.empty() && a[0] != '-') return a;
  return {};
}

// `agentbox serve ARGS` is `agentbox-serve ARGS`, the binary next to this one: the server's
// libraries would cost every `agentbox run` their loading time. `agentbox mcp ARGS` is
// `agentbox-serve mcp ARGS` (the daemon's rooms, serving one person over stdio).
[[noreturn]] void exec_server(int argc, char** argv, const char* mode = nullptr) {
  const std::string server = agentbox::path_next_to_self("agentbox-serve");
  std::vector<char*> args = {const_cast<char*>("agentbox-serve")};
  if (mode) args.push_back(const_cast<char*>(mode));
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(server.c_str(), args.data());
  std::cerr << "agentbox: cannot run " << server << ": " << std::strerror(errno) << "\n";
  ::_exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "serve") exec_server(argc, argv);
  if (argc >= 2 && std::string_view(argv[1]) == "mcp") exec_server(argc, argv, "mcp");

  // Everything after the first "--" is the command, verbatim: CLI11 would still read options
  // among those words (`run -- grep --bind x` must run grep, not add a bind).
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> after_dashes;
  if (auto dd = std::find(args.begin(), args.end(), "--"); dd != args.end()) {
    after_dashes.assign(dd + 1, args.end());
    args.erase(dd, args.end());
  }

  // Every subcommand is listed, but only the one named gets its options (all of them for
  // --help-all): building the ~70 options of every command, their validators and help text,
  // cost each `agentbox run` ~0.3 ms of allocations and page faults (bench/RESULTS.md).
  const std::string_view named = named_subcommand(args);
  const bool every = std::find(args.begin(), args.end(), "--help-all") != args.end();
  auto wanted = [&](std::string_view name) { return every || named == name; };

  CLI::App app{"agentbox: kernel-isolated boxes for people and their agents", "agentbox"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all");

  agentbox::cli::RunOptions run_opts;
  auto* run = app.add_subcommand("run", "Run a command (or a shell) in a fresh sandbox box");
  if (wanted("run")) agentbox::cli::add_run_options(*run, run_opts);
  auto* doctor = app.add_subcommand("doctor", "Report what this host supports and what agentbox enforces");
  std::string doctor_config;
  if (wanted("doctor"))
    doctor->add_option("--config", doctor_config,
                       "The server config whose [agent] to check (default $AGENTBOX_CONFIG)");
  // Listed for --help; the arguments are agentbox-serve's (see exec_server).
  app.add_subcommand("serve", "Serve the Open Terminal API with a box per user (agentbox serve --help)");
  app.add_subcommand("mcp", "Serve the box's tools to one MCP client over stdin/stdout (agentbox mcp --help)");
  std::string config_file;
  auto* config = app.add_subcommand("config", "Work with the server configuration");
  CLI::App* config_check = nullptr;
  if (wanted("config")) {
    config->require_subcommand(1);
    config_check = config->add_subcommand("check", "Validate a config file without starting");
    config_check->add_option("file", config_file, "The config file")->required();
  }
  agentbox::cli::BackupOptions backup_opts;
  auto* backup = app.add_subcommand("backup", "The mirror of homes, through the running daemon (admin key)");
  if (wanted("backup")) agentbox::cli::add_backup_options(*backup, backup_opts);
  agentbox::cli::AccountsOptions accounts_opts;
  auto* accounts = app.add_subcommand("accounts", "The accounts, through the running daemon (admin key)");
  if (wanted("accounts")) agentbox::cli::add_accounts_options(*accounts, accounts_opts);
  agentbox::cli::KeysOptions keys_opts;
  auto* keys = app.add_subcommand("keys", "Per-user API keys, through the running daemon (admin key)");
  if (wanted("keys")) agentbox::cli::add_keys_options(*keys, keys_opts);
  agentbox::cli::ClusterOptions cluster_opts;
  auto* cluster = app.add_subcommand("cluster", "A cluster of agentbox nodes behind nginx (docs/SCALING.md)");
  if (wanted("cluster")) agentbox::cli::add_cluster_options(*cluster, cluster_opts);
  agentbox::cli::WorkspacesOptions workspaces_opts;
  auto* workspaces = app.add_subcommand("workspaces", "Contexts' workspaces, through the running daemon (admin key)");
  if (wanted("workspaces")) agentbox::cli::add_workspaces_options(*workspaces, workspaces_opts);

  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  try {
    app.parse(args);
    if (!after_dashes.empty()) {
      if (!run->parsed()) throw CLI::ExtrasError(after_dashes);
      if (!run_opts.command.empty()) throw CLI::ValidationError("command", "give the command after -- only");
      run_opts.command = after_dashes;
    }
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "agentbox: " << e.what() << " (see agentbox --help)\n";
    return 2;
  }

  try {
    if (run->parsed()) return agentbox::cli::run_in_box(run_opts);
    if (doctor->parsed())
      return agentbox::run_doctor(::geteuid() == 0, std::cout,
                                  doctor_config.empty() ? std::nullopt : std::optional<std::string>(doctor_config));
    if (config_check && config_check->parsed()) return agentbox::cli::config_check(config_file);
    if (backup->parsed()) return agentbox::cli::run_backup(*backup, backup_opts);
    if (accounts->parsed()) return agentbox::cli::run_accounts(*accounts, accounts_opts);
    if (cluster->parsed()) return agentbox::cli::run_cluster(*cluster, cluster_opts);
    if (keys->parsed()) return agentbox::cli::run_keys(*keys, keys_opts);
    if (workspaces->parsed()) return agentbox::cli::run_workspaces(*workspaces, workspaces_opts);
  } catch (const agentbox::UsageError& e) {
    std::cerr << "agentbox: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "agentbox: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
