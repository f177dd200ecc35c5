#include "accounts/trash_upkeep.hpp"

#include <ctime>

#include "fs/trash.hpp"
#include "util/log.hpp"
#include "util/thread_name.hpp"

namespace agentbox::accounts {

namespace {

bool nearly_full(const VolumeUsage& u) {
  if (u.bytes_limit == 0) return false;
  const auto below = [](uint64_t used, uint64_t limit) {
    return limit > used && static_cast<double>(limit - used) >= TrashUpkeep::kFreeShare * static_cast<double>(limit);
  };
  return !below(u.bytes_used, u.bytes_limit) || (u.inodes_limit && !below(u.inodes_used, u.inodes_limit));
}

}  // namespace

TrashUpkeep::TrashUpkeep(AccountDirectory& callers, AccountStore& accounts, uint32_t trash_days,
                         std::chrono::seconds interval)
    : callers_(callers), accounts_(accounts), trash_days_(trash_days), interval_(interval) {
  thread_ = std::thread([this] {
    name_this_thread("trash-upkeep");
    std::unique_lock lock(mu_);
    while (!stopping_) {
      std::vector<std::function<void()>> passes = passes_;
      lock.unlock();
      for (const auto& pass : passes) {
        try {
          pass();
        } catch (const std::exception& e) {
          log::warn("accounts", "volume upkeep: {}", e.what());
        }
      }
      run_once();
      lock.lock();
      wake_.wait_for(lock, interval_, [this] { return stopping_; });
    }
  });
}

TrashUpkeep::~TrashUpkeep() { stop(); }

void TrashUpkeep::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TrashUpkeep::add_pass(std::function<void()> pass) {
  std::lock_guard lock(mu_);
  passes_.push_back(std::move(pass));
}

void TrashUpkeep::run_once() {
  AccountVolumes& volumes = callers_.volumes();
  const int64_t cutoff = static_cast<int64_t>(::time(nullptr)) - int64_t{trash_days_} * 86400;
  for (const std::string& name : volumes.opened()) {
    try {
      std::optional<Account> account = accounts_.find_by_name(name);
      if (!account) continue;
      auto home = callers_.home(*account);
      Trash trash(volumes.paths(name).trash, *home);
      size_t purged = trash.purge_before(cutoff);
      while (nearly_full(volumes.usage(name)) && trash.purge_oldest()) ++purged;
      if (purged)
        log::info("accounts", "trash of {}: {} item(s) deleted for good (retention or a full disk)", name, purged);
    } catch (const std::exception& e) {
      log::warn("accounts", "trash of {}: {}", name, e.what());
    }
  }
  try {
    if (size_t n = volumes.purge_retired(cutoff))
      log::info("accounts", "{} deleted account volume(s) purged for good", n);
  } catch (const std::exception& e) {
    log::warn("accounts", "deleted account volumes: {}", e.what());
  }
}

}  // namespace agentbox::accounts
