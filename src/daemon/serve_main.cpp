// agentbox-serve: the HTTP server (`agentbox serve` execs it), and `agentbox mcp` (`agentbox-serve
// mcp ARGS`: the same rooms serving one person over stdio, daemon/mcp_stdio.hpp). It is its own binary so that the
// server's libraries (Beast, OpenSSL, SQLite, RE2, libzip, spdlog) stay out of `agentbox`, which
// starts once per `agentbox run` and pays for every library it maps.
#include <signal.h>

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/run_options.hpp"
#include "daemon/mcp_stdio.hpp"
#include "daemon/serve.hpp"
#include "daemon/spdlog_sink.hpp"
#include "util/crash_report.hpp"
#include "util/error.hpp"

namespace {

int mcp_main(int argc, char** argv) {
  CLI::App app{
      "agentbox mcp: the box's tools (run_command, read_file, write_file, ...) for one MCP client over "
      "stdin/stdout, on boxes made as `agentbox run` makes them",
      "agentbox mcp"};
  agentbox::cli::RunOptions o;
  agentbox::cli::add_box_options(app, o);
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "agentbox mcp: " << e.what() << " (see agentbox mcp --help)\n";
    return 2;
  }
  try {
    return agentbox::daemon::serve_mcp_stdio(o);
  } catch (const agentbox::UsageError& e) {
    std::cerr << "agentbox mcp: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "agentbox mcp: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  agentbox::install_crash_report("agentbox serve");
  agentbox::daemon::install_spdlog_sink();  // before any thread: every log line through spdlog
  // Once, for every thread the daemon starts: a write to a pipe or socket whose reader is gone
  // (a command's stdin, a client that left) answers EPIPE where it is made, instead of a
  // SIGPIPE that would end the daemon. What the daemon execs gets the default back
  // (box/launch.cpp, util/run_program.cpp; the zygote is spawned with default dispositions).
  ::signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && std::string(argv[1]) == "mcp") return mcp_main(argc, argv);
  CLI::App app{"agentbox serve: the Open Terminal API with a box per user", "agentbox serve"};
  agentbox::daemon::ServeOptions o;
  app.add_option("--config", o.config, "Config file (TOML); default $AGENTBOX_CONFIG or built-in defaults")
      ->type_name("FILE");
  app.add_option("--listen", o.listen, "Address to listen on (default 127.0.0.1:8000)")->type_name("ADDR:PORT");
  app.add_option("--state", o.state, "State directory (default ./agentbox-state)")->type_name("DIR");
  app.add_option("--cluster", o.cluster, "Cluster file: serve only the users the ring (or a pin) gives this node")
      ->type_name("FILE");
  app.add_option("--node", o.node, "This node's name in the cluster file (with --cluster)")->type_name("NAME");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "agentbox serve: " << e.what() << " (see agentbox serve --help)\n";
    return 2;
  }
  try {
    return agentbox::daemon::serve(o);
  } catch (const agentbox::UsageError& e) {
    std::cerr << "agentbox serve: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "agentbox serve: " << e.what() << "\n";
    return 1;
  }
}
