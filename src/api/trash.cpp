#include "api/trash.hpp"

#include "api/errors.hpp"
#include "api/services.hpp"
#include "api/storage_full.hpp"
#include "api/workspaces.hpp"
#include "fs/trash.hpp"
#include "http/json_body.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

using nlohmann::json;

json item_json(const TrashItem& t, uint32_t trash_days) {
  json j = {{"id", t.id},
            {"path", t.path},
            {"type", t.type},
            {"size", t.size},
            {"deleted_at", t.deleted_at},
            {"expires_at", t.deleted_at + int64_t{trash_days} * 86400}};
  // A context's workspace (api/workspaces.hpp): restored to its context, not into the home.
  if (t.workspace)
    j["workspace"] = {{"profile", t.workspace->profile},
                      {"context", t.workspace->context.empty() ? json(nullptr) : json(t.workspace->context)}};
  return j;
}

// DELETE /files/trash: one item (?id=) or all of them, for good.
Response empty_trash(accounts::AccountDirectory& callers, const Request& req) {
  // An account with no volume has deleted nothing: none is made to say so.
  accounts::Caller caller = callers.resolve(req, false, accounts::HomeUse::read);
  auto id = req.query_param("id");
  if (!caller.volume) {
    if (id) throw FsError(FsErrorKind::not_found, "Not in the trash: " + *id);
    return Response::json({{"deleted", 0}});
  }
  Trash trash(callers.volume_of(caller.account).trash, *caller.home);
  if (id) {
    trash.remove(*id);
    return Response::json({{"deleted", 1}});
  }
  return Response::json({{"deleted", trash.clear()}});
}

}  // namespace

void add_trash_routes(Router& router, const Services& s) {
  accounts::AccountDirectory& callers = *s.callers;
  const std::shared_ptr<FairPool>& pool = s.file_pool;
  const uint32_t trash_days = s.trash_days;
  router.add_async(
      http::verb::get, "/files/trash",
      offload(pool, Handler([&callers, trash_days](const Request& req) {
                // An account with no volume yet has deleted nothing: none is made to say so.
                accounts::Caller caller = callers.resolve(req, false, accounts::HomeUse::read);
                json items = json::array();
                uint64_t bytes = 0;
                if (caller.volume) {
                  Trash trash(callers.volume_of(caller.account).trash, *caller.home);
                  for (const TrashItem& t : trash.list()) {
                    items.push_back(item_json(t, trash_days));
                    bytes += t.size;
                  }
                }
                return Response::json({{"items", std::move(items)}, {"size", bytes}, {"retention_days", trash_days}});
              })));

  router.add_async(
      http::verb::post, "/files/trash/restore",
      offload(pool, Handler([&callers, manager = s.manager](const Request& req) {
                json body = parse_json_object(req);
                const std::string id = required_string(body, "id");
                // An account with no volume has nothing to restore, and gets no volume to say so.
                accounts::Caller caller = callers.resolve(req, false, accounts::HomeUse::read);
                if (!caller.volume) throw FsError(FsErrorKind::not_found, "Not in the trash: " + id);
                std::optional<HomePath> to;
                if (auto path = optional_string(body, "path")) to = caller.home->path(*path, caller.cwd);
                Trash trash(callers.volume_of(caller.account).trash, *caller.home);
                if (!to) {
                  // A workspace goes back where its context's box finds it, whoever asks.
                  if (std::optional<TrashItem> item = trash.find(id); item && item->workspace)
                    return restore_workspace_item(callers, *manager, caller.account, *item);
                }
                TrashRestore r = with_room(callers, req, [&] { return trash.restore(id, to); });
                return Response::json({{"path", r.path}, {"replaced", r.replaced ? json(*r.replaced) : json(nullptr)}});
              })));

  router.add_async(http::verb::delete_, "/files/trash",
                   offload(pool, Handler([&callers](const Request& req) { return empty_trash(callers, req); })));
}

}  // namespace agentbox::api
