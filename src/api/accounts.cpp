#include "api/accounts.hpp"

#include <chrono>
#include <ctime>
#include <future>
#include <set>

#include "accounts/workspaces.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "http/error.hpp"
#include "store/box_key.hpp"
#include "util/log.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

// A box stops in well under a second (init is killed, its cgroup removed); this bounds a
// stuck one so the operator hears about it.
constexpr auto kStopWait = std::chrono::seconds(60);
constexpr int64_t kDay = 86400;

nlohmann::json disk_json(const VolumeUsage& u) {
  if (u.bytes_limit == 0) return nullptr;  // plain volumes: no quota to report against
  return {{"used", u.bytes_used},
          {"limit", u.bytes_limit},
          {"inodes_used", u.inodes_used},
          {"inodes_limit", u.inodes_limit}};
}

// The account's contexts (accounts/workspaces.hpp): their count, when its volume is in use
// (null otherwise: an unmounted volume is not mounted for a listing).
nlohmann::json workspace_count(accounts::AccountDirectory& callers, const std::set<std::string>& opened,
                               const std::string& name) {
  if (!opened.contains(name)) return nullptr;
  return accounts::list_workspaces(callers.volumes().paths(name).root, false).size();
}

Response list(AccountStore& accounts, accounts::AccountDirectory& callers, BoxManager& boxes) {
  const std::map<std::string, std::string> states = box_states(boxes);
  const std::vector<std::string> in_use = callers.volumes().opened();
  const std::set<std::string> opened(in_use.begin(), in_use.end());
  nlohmann::json out = nlohmann::json::array();
  for (const Account& a : accounts.list()) {
    auto state = states.find(a.name);
    out.push_back({{"user", a.external_id},
                   {"name", a.name},
                   {"uid", a.uid},
                   {"created", a.created},
                   {"last_active", a.last_seen},
                   {"box", state == states.end() ? "stopped" : state->second},
                   {"disk", disk_json(callers.volumes().usage(a.name))},
                   {"workspaces", workspace_count(callers, opened, a.name)}});
  }
  return Response::json({{"accounts", std::move(out)}});
}

Response remove(AccountStore& accounts, accounts::AccountDirectory& callers, BoxManager& boxes, uint32_t trash_days,
                const std::string& user) {
  std::optional<Account> found = accounts.find_by_name_or_id(user);
  if (!found) throw HttpError(http::status::not_found, "Unknown user: " + user);
  const Account account = *found;
  callers.admission().check(account.external_id, &account);  // a move in progress finishes first (503)
  // 1. Its requests are refused from here on, so nothing new starts or opens its home.
  callers.begin_delete(account);
  // 2. Its box stops, for good: what ran in it (commands, terminals, agent runs) ends.
  stop_box_for_good(boxes, account.name);
  // 3. The records go (the commit point), then the files: a crash between the two leaves a
  //    volume with no account, which nothing serves.
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  if (!accounts.remove(account.name, now)) throw HttpError(http::status::not_found, "Unknown user: " + user);
  const std::string kept = callers.volumes().retire(account.name);
  callers.end_delete(account);
  log::info("accounts", "account {} ({}) deleted by the operator; its volume is in {}", account.name,
            account.external_id, kept);
  return Response::json({{"user", account.external_id},
                         {"name", account.name},
                         {"uid", account.uid},
                         {"deleted", now},
                         {"purge_after", now + int64_t{trash_days} * kDay}});
}

}  // namespace

std::map<std::string, std::string> box_states(BoxManager& boxes) {
  auto answer = std::make_shared<std::promise<std::map<std::string, std::string>>>();
  auto states = answer->get_future();
  boxes.box_states([answer](std::map<std::string, std::string> s) { answer->set_value(std::move(s)); });
  if (states.wait_for(kStopWait) != std::future_status::ready)
    throw HttpError(http::status::gateway_timeout, "The box loop did not answer");
  return states.get();
}

void stop_box_for_good(BoxManager& boxes, const std::string& name) {
  // The account's own box, then its profiles' (keys NAME~PROFILE: store/box_key.hpp).
  std::vector<std::string> keys = {name};
  for (const auto& [key, state] : box_states(boxes))
    if (key != name && account_of_box(key) == name) keys.push_back(key);
  for (const std::string& key : keys) {
    auto stopped = std::make_shared<std::promise<void>>();
    std::future<void> gone = stopped->get_future();
    boxes.close(key, [stopped] { stopped->set_value(); });
    if (gone.wait_for(kStopWait) != std::future_status::ready)
      throw HttpError(http::status::gateway_timeout,
                      "The box of " + key + " did not stop in time; its requests stay refused, try again");
  }
}

void add_account_routes(Router& router, const Services& s) {
  AccountStore& accounts = *s.accounts;
  accounts::AccountDirectory& callers = *s.callers;
  BoxManager& boxes = *s.manager;
  const std::shared_ptr<FairPool>& pool = s.file_pool;
  const uint32_t trash_days = s.trash_days;
  const RouteOptions admin{.admin = true};
  router.add_async(
      http::verb::get, "/admin/accounts",
      offload(pool, Handler([&accounts, &callers, &boxes](const Request&) { return list(accounts, callers, boxes); })),
      admin);
  router.add_async(http::verb::delete_, "/admin/accounts/{user}",
                   offload(pool, Handler([&accounts, &callers, &boxes, trash_days](const Request& req) {
                             return remove(accounts, callers, boxes, trash_days, req.param("user"));
                           })),
                   admin);
}

}  // namespace agentbox::api
