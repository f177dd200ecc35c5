#pragma once
// The operator's view of the accounts (admin key only, RouteOptions::admin):
//   GET    /admin/accounts          every account: {user, name, uid, created, last_active, box,
//                                   disk}, ordered by uid. box: "running", "starting",
//                                   "stopping" or "stopped"; disk: {used, limit, inodes_used,
//                                   inodes_limit} in bytes and inodes, null without quotas;
//                                   empty: its volume holds nothing but a new account's
//                                   (true for one never made or forgotten). ?stale=true
//                                   (or stale_days=N, 1-36500): only those not seen for N days
//                                   ([accounts] forget_after_days, else 30), with "stale_days".
//   DELETE /admin/accounts/{user}   stops the account's box for good, deletes its records
//                                   (process records, chat sessions) and moves its volume (home,
//                                   trash, logs) to VOLUMES/.deleted, purged after trash_days.
// `user` is an account name or the external user id. Its name and uid are never given again;
// the same external id later gets a new, empty account. While the deletion runs, the account's
// own requests get 409. Errors as {"detail"}: 404 unknown user, 503 an account being moved
// (api/moves.hpp), 504 a box that would not stop.
#include <cstdint>
#include <map>
#include <memory>

#include "accounts/directory.hpp"
#include "box/box_manager.hpp"
#include "http/offload.hpp"
#include "http/router.hpp"
#include "store/account_store.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

// Stops the account's boxes (its profiles' too) for good: what ran in it (commands, terminals, agent runs) ends.
// HttpError 504 when it has not stopped within a minute. Blocks: call from a pool thread.
void stop_box_for_good(BoxManager& boxes, const std::string& name);

// Every box's state by key ("running", "starting", "stopping"; absent: stopped), as the box
// loop answers from each box's strand. HttpError 504 when it does not answer within a minute.
// Blocks: call from a pool thread.
std::map<std::string, std::string> box_states(BoxManager& boxes);

struct Services;
// Both routes run on the file pool (a deletion waits for the box to stop).
void add_account_routes(Router& router, const Services& services);

}  // namespace agentbox::api
