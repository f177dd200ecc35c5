#pragma once
// `agentbox backup status|run|restore [--all]`: the mirror of homes, through the running daemon's
// /admin/backup routes (cli/admin_client.hpp). `agentbox backup mirror-once SRC DST` (hidden)
// runs one pass of the same engine on two directories without a daemon: for bench/mirror_bench.sh.
#include <optional>
#include <string>

#include "cli/admin_client.hpp"

namespace CLI {
class App;
}

namespace agentbox::cli {

struct BackupOptions {
  AdminTargetOptions target;
  bool json = false;                // status: the daemon's JSON as is
  std::string user;                 // restore
  bool all = false;                 // restore --all: every account of the mirror the node does not hold
  std::string path;                 // restore: "" = the whole home
  std::optional<std::string> date;  // restore: a day of .deleted
  std::string source, dest;         // mirror-once
};

// Adds the subcommands and options of `backup` to it; run_backup() runs whichever was parsed.
void add_backup_options(CLI::App& backup, BackupOptions& options);
int run_backup(CLI::App& backup, const BackupOptions& options);

}  // namespace agentbox::cli
