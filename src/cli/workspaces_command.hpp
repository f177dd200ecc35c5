#pragma once
// `agentbox workspaces list|delete`: the operator's view of the contexts' workspaces of an
// account (issue 35: profiles with isolation = "context"), through the running daemon's
// /admin/accounts/{user}/workspaces routes (api/workspaces.hpp, cli/admin_client.hpp).
#include <string>

#include "cli/admin_client.hpp"

namespace CLI {
class App;
}

namespace agentbox::cli {

struct WorkspacesOptions {
  AdminTargetOptions target;
  bool json = false;    // list: the daemon's JSON as is
  std::string user;     // account name or external id
  std::string context;  // delete: the context id (chat:..., automation:...) or its hash
  std::string profile;  // delete: the profile, when the context has workspaces in several
};

// Adds the subcommands and options of `workspaces` to it; run_workspaces() runs whichever was parsed.
void add_workspaces_options(CLI::App& workspaces, WorkspacesOptions& options);
int run_workspaces(CLI::App& workspaces, const WorkspacesOptions& options);

}  // namespace agentbox::cli
