#include "api/workspaces.hpp"

#include <chrono>
#include <future>

#include "accounts/context_id.hpp"
#include "api/accounts.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "config/profile_table.hpp"
#include "http/error.hpp"
#include "http/offload.hpp"
#include "store/box_key.hpp"
#include "util/log.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

using nlohmann::json;

// A box stops in well under a second; this bounds a stuck one (as DELETE /admin/accounts does).
constexpr auto kStopWait = std::chrono::seconds(60);

// The context of the path, checked as the header is (accounts/context_id.hpp); "default" is
// the user's home, which is no workspace.
std::string context_param(const Request& req) {
  const std::string context = req.param("context");
  if (std::string_view why = accounts::context_id_problem(context); !why.empty())
    throw HttpError(http::status::bad_request, "Invalid context '" + context + "': " + std::string(why));
  if (context == accounts::kDefaultContext)
    throw HttpError(http::status::conflict,
                    "The context 'default' is the user's home, not a workspace: its files are deleted "
                    "with /files/delete");
  return context;
}

json workspace_json(const accounts::Workspace& w, const std::map<std::string, std::string>& states,
                    const std::string& name) {
  const std::string key = box_key_of_hash(name, w.profile, w.hash);
  auto state = states.find(key);
  return {{"profile", w.profile},
          {"hash", w.hash},
          {"context", w.context.empty() ? json(nullptr) : json(w.context)},
          {"size", w.size},
          {"created", w.created},
          {"last_used", w.last_used},
          {"box", state == states.end() ? "stopped" : state->second}};
}

// Stops the workspace's box, then moves it to the trash: {"context", "trash_id", "profile"}.
Response delete_workspace(const Services& s, const Account& account, const accounts::Workspace& w,
                          const std::string& named) {
  stop_workspace_box(*s.manager, account, w);
  TrashItem item = accounts::trash_workspace(*s.callers, account, w);
  log::info("accounts", "workspace {} of {} ({}) moved to the trash as {}", w.hash, account.name, w.profile, item.id);
  return Response::json({{"context", named}, {"profile", w.profile}, {"trash_id", item.id}});
}

// DELETE /p/{profile}/workspaces/{context}: the caller's own, in the request's profile.
Response delete_own(const Services& s, const Request& req) {
  const std::string context = context_param(req);
  if (req.scope.empty())
    throw HttpError(http::status::not_found,
                    "Workspaces belong to a profile with isolation = \"context\": DELETE "
                    "/p/{profile}/workspaces/{context}");
  std::shared_ptr<const ProfileConfig> table = s.profiles->get();
  const Profile* profile = table->find(req.scope);
  if (!profile || profile->isolation != Profile::Isolation::context)
    throw HttpError(http::status::not_found,
                    "Profile '" + req.scope + "' keeps no workspaces: its isolation is \"user\", not \"context\"");
  // Not resolve(): that would make the workspace the request's own header names.
  const Account account = s.callers->account_for(req);
  const std::vector<accounts::Workspace> found = accounts::find_workspaces(
      accounts::list_workspaces(s.callers->volume_of(account).root, false), context, req.scope);
  if (found.empty())
    throw HttpError(http::status::not_found,
                    "No workspace for context '" + context + "' in profile '" + req.scope + "'");
  return delete_workspace(s, account, found.front(), context);
}

Account account_named(const Services& s, const std::string& user) {
  std::optional<Account> found = s.accounts->find_by_name_or_id(user);
  if (!found) throw HttpError(http::status::not_found, "Unknown user: " + user);
  return *found;
}

Response list_for_admin(const Services& s, const Request& req) {
  const Account account = account_named(s, req.param("user"));
  const auto states = box_states(*s.manager);
  json out = json::array();
  for (const accounts::Workspace& w : accounts::list_workspaces(s.callers->volume_of(account).root, true))
    out.push_back(workspace_json(w, states, account.name));
  return Response::json({{"user", account.external_id}, {"name", account.name}, {"workspaces", std::move(out)}});
}

// The operator names a context by its id or its hash; without ?profile= it must be one only.
Response delete_for_admin(const Services& s, const Request& req) {
  const Account account = account_named(s, req.param("user"));
  const std::string context = req.param("context");
  const std::string profile(req.query_param("profile").value_or(""));
  const std::vector<accounts::Workspace> found =
      accounts::find_workspaces(accounts::list_workspaces(s.callers->volume_of(account).root, false), context, profile);
  if (found.empty())
    throw HttpError(http::status::not_found, "No workspace of " + account.name + " for context '" + context + "'" +
                                                 (profile.empty() ? "" : " in profile '" + profile + "'"));
  if (found.size() > 1) {
    std::string names;
    for (const accounts::Workspace& w : found) names += (names.empty() ? "'" : ", '") + w.profile + "'";
    throw HttpError(http::status::conflict, "Context '" + context + "' has a workspace in profiles " + names +
                                                ": name one with ?profile= (--profile)");
  }
  return delete_workspace(s, account, found.front(), found.front().context.empty() ? context : found.front().context);
}

}  // namespace

void stop_workspace_box(BoxManager& boxes, const Account& account, const accounts::Workspace& w) {
  const std::string key = box_key_of_hash(account.name, w.profile, w.hash);
  auto stopped = std::make_shared<std::promise<void>>();
  std::future<void> gone = stopped->get_future();
  boxes.stop(key, [stopped] { stopped->set_value(); });
  if (gone.wait_for(kStopWait) != std::future_status::ready)
    throw HttpError(http::status::gateway_timeout, "The box of " + key + " did not stop in time; try again");
}

Response restore_workspace_item(accounts::AccountDirectory& callers, BoxManager& boxes, const Account& account,
                                const TrashItem& item) {
  const TrashWorkspace& ws = *item.workspace;
  stop_workspace_box(boxes, account, {.profile = ws.profile, .hash = ws.hash});
  TrashRestore r = accounts::restore_workspace(callers, account, item.id);
  return Response::json({{"path", r.path},
                         {"replaced", r.replaced ? json(*r.replaced) : json(nullptr)},
                         {"workspace", {{"profile", ws.profile}, {"context", ws.context}}}});
}

void add_workspace_routes(Router& router, const Services& s) {
  const std::shared_ptr<FairPool>& pool = s.file_pool;
  auto services = std::make_shared<const Services>(s);  // the routes outlive the caller's copy
  router.add_async(http::verb::delete_, "/workspaces/{context}",
                   offload(pool, Handler([services](const Request& req) { return delete_own(*services, req); })));
  const RouteOptions admin{.admin = true};
  router.add_async(http::verb::get, "/admin/accounts/{user}/workspaces",
                   offload(pool, Handler([services](const Request& req) { return list_for_admin(*services, req); })),
                   admin);
  router.add_async(http::verb::delete_, "/admin/accounts/{user}/workspaces/{context}",
                   offload(pool, Handler([services](const Request& req) { return delete_for_admin(*services, req); })),
                   admin);
}

}  // namespace agentbox::api
