#pragma once
// The contexts' workspaces of an account (issue 35), kept in its volume where no box reaches
// them but the context's own (accounts/directory.hpp):
//
//   VOLUME/workspaces/PROFILE/HASH        the workspace, the context's box's home (the account's, 0700)
//   VOLUME/workspaces/PROFILE/HASH.json   its record (the daemon's): {"context": ID, "created": T};
//                                         its mtime is the context's last use
//
// HASH is context_hash(ID) (store/box_key.hpp). The record names the context for the operator
// (`agentbox workspaces list`) and dates it for the sweep (accounts/workspace_sweep.hpp); a
// workspace without one (made before records were kept) is listed by hash, dated by its mtime.
// Deleting a workspace moves it to the account's trash as one item (fs/trash.hpp), which
// restores to the same place; its box is the caller's to stop first.
//
// Runs on: any thread (file system work: a pool's, never the API's io thread).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "accounts/directory.hpp"
#include "fs/trash.hpp"

namespace agentbox::accounts {

struct Workspace {
  std::string profile;
  std::string hash;       // context_hash(context): the directory's name
  std::string context;    // the context id; "" when no record names it
  int64_t created = 0;    // unix seconds: the record's (else the directory's mtime)
  int64_t last_used = 0;  // unix seconds: the record's mtime (else the directory's)
  uint64_t size = 0;      // bytes of its files; only when listed with sizes
};

// Records a use of the workspace at `dir` (the record's mtime), writing the record when it has
// none. One utimensat on the way of each request of a context; failures are ignored (a record
// is bookkeeping, never a reason to refuse a request).
void note_workspace_use(const std::string& dir, std::string_view context);

// Every workspace in the volume whose root is `volume_root`, by profile then hash.
std::vector<Workspace> list_workspaces(const std::string& volume_root, bool with_sizes);

// The workspaces of `all` that `context` names, by its id or by its hash, in `profile` ("": any).
std::vector<Workspace> find_workspaces(const std::vector<Workspace>& all, std::string_view context,
                                       std::string_view profile);

// Moves the workspace `w` of the account into its trash as one item, its record gone; the
// item names the context (its id, else its hash) and restores to the same place.
TrashItem trash_workspace(AccountDirectory& callers, const Account& account, const Workspace& w);

// Puts the workspace item `id` back where its context's box finds it, with a new record (made
// and used now: a sweep does not take it again at once). A workspace in the way goes to the
// trash first.
TrashRestore restore_workspace(AccountDirectory& callers, const Account& account, const std::string& id);

// The workspace item's directory: VOLUME/workspaces/PROFILE/HASH.
std::string workspace_dir(const std::string& volume_root, std::string_view profile, std::string_view hash);

}  // namespace agentbox::accounts
