#include "accounts/account_forgetting.hpp"

#include <algorithm>
#include <atomic>

#include "audit/trail.hpp"
#include "util/log.hpp"

namespace agentbox::accounts {

namespace {
constexpr int64_t kDay = 86400;
std::atomic<uint64_t> forgotten_total{0};
}  // namespace

uint64_t accounts_forgotten_total() { return forgotten_total.load(std::memory_order_relaxed); }

bool stale_account(int64_t last_seen, int64_t now, uint32_t days) {
  return days > 0 && now - last_seen >= int64_t{days} * kDay;
}

std::vector<std::string> forget_candidates(const std::vector<Account>& accounts, int64_t now, uint32_t days,
                                           const std::set<std::string>& busy) {
  std::vector<std::string> out;
  for (const Account& a : accounts)
    if (stale_account(a.last_seen, now, days) && !busy.contains(a.name)) out.push_back(a.name);
  return out;
}

AccountForgetting::AccountForgetting(AccountVolumes& volumes, AccountStore& accounts, Sources sources)
    : volumes_(volumes), accounts_(accounts), sources_(std::move(sources)) {}

size_t AccountForgetting::run_due() {
  const auto now = std::chrono::steady_clock::now();
  if (last_ && now - *last_ < sources_.every) return 0;
  last_ = now;
  return run_once();
}

size_t AccountForgetting::run_once() {
  if (sources_.days == 0) return 0;
  const int64_t now = sources_.now();
  std::vector<Account> accounts = accounts_.list();
  // Cheap first: no stale account, no need to ask the box loop.
  bool any = false;
  for (const Account& a : accounts) any = any || stale_account(a.last_seen, now, sources_.days);
  if (!any) return 0;
  std::optional<std::set<std::string>> busy = sources_.busy ? sources_.busy() : std::set<std::string>{};
  if (!busy) return 0;  // which boxes run cannot be told now: nothing is forgotten this pass
  size_t forgotten = 0;
  for (const std::string& name : forget_candidates(accounts, now, sources_.days, *busy)) {
    try {
      std::optional<uint64_t> freed = volumes_.forget_if_empty(name);
      if (!freed) continue;
      ++forgotten;
      forgotten_total.fetch_add(1, std::memory_order_relaxed);
      auto a = std::find_if(accounts.begin(), accounts.end(), [&](const Account& x) { return x.name == name; });
      audit::account(audit::AccountActivity::forget, name, a != accounts.end() ? a->external_id : std::string());
      log::info("accounts", "the empty volume of {} (not seen for {} days or more) is forgotten: {} bytes freed", name,
                sources_.days, *freed);
    } catch (const std::exception& e) {
      log::warn("accounts", "forgetting the volume of {}: {}", name, e.what());
    }
  }
  return forgotten;
}

}  // namespace agentbox::accounts
