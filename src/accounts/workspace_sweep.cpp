#include "accounts/workspace_sweep.hpp"

#include "store/box_key.hpp"
#include "util/log.hpp"

namespace agentbox::accounts {

namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kWeek = 7 * kDay;
constexpr int64_t kFirstSunday = 3 * kDay;  // 1970-01-01 was a Thursday

}  // namespace

int64_t last_reset(int64_t now, std::chrono::seconds period) {
  const int64_t p = period.count();
  if (p <= 0) return now;
  const int64_t origin = p == kWeek ? kFirstSunday : 0;
  const int64_t since = now - origin;
  const int64_t floored = since >= 0 ? since / p * p : -((-since + p - 1) / p * p);
  return origin + floored;
}

bool workspace_due(const Workspace& w, const WorkspaceKeeping& keeping, int64_t now) {
  if (keeping.keep_days && now - w.last_used >= int64_t{*keeping.keep_days} * kDay) return true;
  if (keeping.reset && w.created < last_reset(now, *keeping.reset)) return true;
  return false;
}

WorkspaceSweep::WorkspaceSweep(AccountDirectory& callers, AccountStore& accounts, Sources sources)
    : callers_(callers), accounts_(accounts), sources_(std::move(sources)) {}

size_t WorkspaceSweep::run_once() {
  const std::map<std::string, WorkspaceKeeping> keeping = sources_.keeping();
  if (keeping.empty()) return 0;  // no profile keeps less than everything: nothing to look at
  const std::set<std::string> busy = sources_.busy_boxes();
  const int64_t now = sources_.now();
  AccountVolumes& volumes = callers_.volumes();
  size_t moved = 0;
  for (const std::string& name : volumes.opened()) {
    try {
      std::optional<Account> account = accounts_.find_by_name(name);
      if (!account) continue;
      for (const Workspace& w : list_workspaces(volumes.paths(name).root, false)) {
        auto k = keeping.find(w.profile);
        if (k == keeping.end() || !workspace_due(w, k->second, now)) continue;
        if (busy.contains(name + kBoxKeySeparator + w.profile + kBoxKeySeparator + w.hash)) continue;
        const TrashItem item = trash_workspace(callers_, *account, w);
        ++moved;
        log::info("accounts", "workspace {} of {} ({}, context {}) unused or reset: in the trash as {}", w.hash, name,
                  w.profile, w.context.empty() ? "?" : w.context, item.id);
      }
    } catch (const std::exception& e) {
      log::warn("accounts", "workspaces of {}: {}", name, e.what());
    }
  }
  return moved;
}

}  // namespace agentbox::accounts
