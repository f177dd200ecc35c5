#include "api/accounts.hpp"

#include <chrono>
#include <ctime>
#include <future>
#include <set>

#include "accounts/account_forgetting.hpp"
#include "accounts/workspaces.hpp"
#include "api/errors.hpp"
#include "api/services.hpp"
#include "http/error.hpp"
#include "http/query_params.hpp"
#include "store/box_key.hpp"
#include "util/log.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified
namespace {

// A box stops in well under a second (init is killed, its cgroup removed); this bounds a
// stuck one so the operator hears about it.
constexpr auto kStopWait = std::chrono::seconds(60);
constexpr int64_t kDay = 86400;
constexpr uint32_t kDefaultStaleDays = 30;  // ?stale without forget_after_days
constexpr int64_t kMaxStaleDays = 36500;

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

// ?stale (or ?stale_days=N): only the accounts not seen for N days by the daemon's clock of
// days, N being [accounts] forget_after_days, else 30. 0: every account.
uint32_t stale_days_of(const Request& req, uint32_t forget_after_days) {
  if (std::optional<int64_t> days = query_int(req, "stale_days", 1, kMaxStaleDays)) return static_cast<uint32_t>(*days);
  if (!query_bool(req, "stale").value_or(false)) return 0;
  return forget_after_days ? forget_after_days : kDefaultStaleDays;
}

Response list(AccountStore& accounts, accounts::AccountDirectory& callers, BoxManager& boxes, uint32_t stale_days,
              int64_t now) {
  const std::map<std::string, std::string> states = box_states(boxes);
  const std::vector<std::string> in_use = callers.volumes().opened();
  const std::set<std::string> opened(in_use.begin(), in_use.end());
  const bool plain = callers.volumes().backend().kind() == VolumeKind::plain;  // no counts: cannot tell
  nlohmann::json out = nlohmann::json::array();
  for (const Account& a : accounts.list()) {
    if (stale_days && !accounts::stale_account(a.last_seen, now, stale_days)) continue;
    auto state = states.find(a.name);
    const VolumeUsage usage = callers.volumes().usage(a.name);
    out.push_back({{"user", a.external_id},
                   {"name", a.name},
                   {"uid", a.uid},
                   {"created", a.created},
                   {"last_active", a.last_seen},
                   {"box", state == states.end() ? "stopped" : state->second},
                   {"disk", disk_json(usage)},
                   {"workspaces", workspace_count(callers, opened, a.name)},
                   {"empty", plain ? nlohmann::json(nullptr) : nlohmann::json(volume_empty(usage))}});
  }
  nlohmann::json answer = {{"accounts", std::move(out)}};
  if (stale_days) answer["stale_days"] = stale_days;
  return Response::json(std::move(answer));
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
  router.add_async(http::verb::get, "/admin/accounts",
                   offload(pool, Handler([&accounts, &callers, &boxes, forget = s.forget_after_days,
                                          now = s.days_now](const Request& req) {
                             const uint32_t stale = stale_days_of(req, forget);
                             return list(accounts, callers, boxes, stale,
                                         now ? now() : static_cast<int64_t>(std::time(nullptr)));
                           })),
                   admin);
  router.add_async(http::verb::delete_, "/admin/accounts/{user}",
                   offload(pool, Handler([&accounts, &callers, &boxes, trash_days](const Request& req) {
                             return remove(accounts, callers, boxes, trash_days, req.param("user"));
                           })),
                   admin);
}

}  // namespace agentbox::api
