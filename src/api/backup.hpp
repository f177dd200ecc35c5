#pragma once
// The operator's routes of the mirror of homes (admin key only, RouteOptions::admin):
//   GET  /admin/backup           the mirror's status: {"enabled": false} when [backup] dir is unset
//   POST /admin/backup/run       a pass now (202); the status says when it has run
//   POST /admin/backup/restore   {"user", "path"?, "date"?}: the saved copy back into the home
//                                {"all": true}: every account of the mirror this node does not
//                                hold, made again with its home (moves/restore_all.hpp): a
//                                lost disk; answers restore_all()'s summary
// `user` is an account name or the external user id. Without `date` the copy is the mirror's
// current one (MIRROR/NAME/home); with it, what was deleted or overwritten that day
// (MIRROR/NAME/.deleted/DATE). Without `path`, the whole of it. Errors as {"detail"}: 404 for an
// unknown user or a path not in the mirror, 409 when the mirror is off, 422 for a bad field
// ('all' with 'user', 'path' or 'date', or not true).
#include <memory>
#include <string>

#include "accounts/directory.hpp"
#include "backup/mirror_service.hpp"
#include "http/offload.hpp"
#include "http/router.hpp"
#include "moves/restore_all.hpp"
#include "store/account_store.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
// services.mirror may be null (no [backup] dir): status says so and the other routes answer
// 409. Restores run on the file pool.
void add_backup_routes(Router& router, const Services& services);

}  // namespace agentbox::api
