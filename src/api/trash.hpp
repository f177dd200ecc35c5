#pragma once
// The caller's trash (fs/trash.hpp), where DELETE /files/delete puts what it deletes:
//   GET    /files/trash                 items, newest first, with the retention
//   POST   /files/trash/restore         {"id": ..., "path": optional destination}
//   DELETE /files/trash[?id=ID]          one item, or all, deleted for good
// File work runs on the file routes' pool.
#include <cstdint>
#include <memory>

#include "accounts/directory.hpp"
#include "http/offload.hpp"
#include "http/router.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

struct Services;
void add_trash_routes(Router& router, const Services& services);

}  // namespace agentbox::api
