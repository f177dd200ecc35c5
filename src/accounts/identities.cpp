#include "accounts/identities.hpp"

#include "util/log.hpp"

namespace agentbox::accounts {

namespace {

constexpr int64_t kTouchEvery = 60;  // seconds; last_seen needs no finer grain

}  // namespace

Identities::Identities(AccountStore& store, size_t known_ids) : store_(store), known_(known_ids) {}

std::optional<Account> Identities::cached(std::string_view external_id, int64_t now) {
  std::lock_guard lock(mu_);
  Known* known = known_.find(external_id);
  if (!known || now - known->touched >= kTouchEvery) return std::nullopt;
  return known->account;
}

std::optional<Account> Identities::find(std::string_view external_id) {
  {
    std::lock_guard lock(mu_);
    if (Known* known = known_.find(external_id)) return known->account;
  }
  std::optional<Account> held = store_.find(external_id);
  if (held) keep(*held);
  return held;
}

Account Identities::create(std::string_view external_id) {
  Account account = store_.get_or_create(external_id);
  keep(account);
  return account;
}

void Identities::keep(const Account& account) {
  std::lock_guard lock(mu_);
  // A new account was made with last_seen = now: no second write for it. One kept already stays.
  known_.insert(account.external_id, Known{account, account.last_seen});
}

void Identities::touch(const Account& account, int64_t now) {
  {
    std::lock_guard lock(mu_);
    Known* known = known_.find(account.external_id);
    if (known && now - known->touched < kTouchEvery) return;
    if (known) known->touched = now;
  }
  try {
    store_.touch(account.name, now);
  } catch (const DbError& e) {
    // Bookkeeping only: a full state disk must not refuse a known user's request for it. The
    // write is tried again at the next request a minute on.
    if (!e.disk_full()) throw;
    log::warn("accounts", "last_seen of {} not recorded: {}", account.name, e.what());
  }
}

void Identities::forget(std::string_view external_id) {
  std::lock_guard lock(mu_);
  known_.erase(external_id);
}

size_t Identities::size() {
  std::lock_guard lock(mu_);
  return known_.size();
}

}  // namespace agentbox::accounts
