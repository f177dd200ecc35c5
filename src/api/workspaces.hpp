#pragma once
// The lifecycle of a context's workspace (issue 35; accounts/workspaces.hpp):
//   DELETE /p/{profile}/workspaces/{context}          the caller's: its box stops, its workspace
//                                                     goes to the trash as one item
//   GET    /admin/accounts/{user}/workspaces          every workspace of an account
//   DELETE /admin/accounts/{user}/workspaces/{context}[?profile=P]   as the caller's DELETE
// A workspace item in the trash is restored by POST /files/trash/restore (api/trash.cpp), which
// stops the context's box first too (restore_workspace_item).
//
// Runs on: the file routes' pool (every handler is offloaded).
#include <string>

#include "accounts/workspaces.hpp"
#include "box/box_manager.hpp"
#include "http/router.hpp"

namespace agentbox::api {

struct Services;
void add_workspace_routes(http::Router& router, const Services& s);

// Stops the box of the account's workspace w (its processes and terminals end, as at an idle
// stop) and waits for it, bounded: 504 when it does not stop.
void stop_workspace_box(BoxManager& boxes, const Account& account, const accounts::Workspace& w);

// POST /files/trash/restore of a workspace item without a destination: its context's box
// stops, the workspace goes back. {"path", "replaced"} as for any item, and "workspace".
http::Response restore_workspace_item(accounts::AccountDirectory& callers, BoxManager& boxes, const Account& account,
                                      const TrashItem& item);

}  // namespace agentbox::api
