#pragma once
// `agentbox accounts list|delete|move`: the operator's view of the accounts, through the running
// daemon's /admin/accounts routes (cli/admin_client.hpp); move: cli/move_command.hpp.
#include <string>

#include "cli/admin_client.hpp"
#include "cli/move_command.hpp"

namespace CLI {
class App;
}

namespace agentbox::cli {

struct AccountsOptions {
  AdminTargetOptions target;
  bool json = false;  // list: the daemon's JSON as is
  std::string user;   // delete: account name or external id
  bool yes = false;   // delete: no question asked
  MoveOptions move;   // move

  // list --stale: only accounts not seen for `days` days, as typed ("" the daemon's default:
  // forget_after_days, else 30).
  bool stale = false;
  std::string days;
};

// Adds the subcommands and options of `accounts` to it; run_accounts() runs whichever was parsed.
void add_accounts_options(CLI::App& accounts, AccountsOptions& options);
int run_accounts(CLI::App& accounts, const AccountsOptions& options);

}  // namespace agentbox::cli
