#include "store/account_store.hpp"

#include <ctime>

#include "audit/trail.hpp"
#include "store/account_name.hpp"

namespace agentbox {
namespace {

constexpr std::string_view kSelectAccount = "SELECT external_id, name, uid, created, last_seen FROM accounts ";

Account account_from_row(const Statement& row) {
  Account a;
  a.external_id = row.column_text(0);
  a.name = row.column_text(1);
  a.uid = static_cast<uid_t>(row.column_int64(2));
  a.gid = a.uid;
  a.home_dir = "volumes/" + a.name + "/home";
  a.created = row.column_int64(3);
  a.last_seen = row.column_int64(4);
  return a;
}

}  // namespace

AccountStore::AccountStore(Db db, UidRange range) : db_(std::move(db)), range_(range) {
  if (range_.count < 2) throw Error("uid range needs at least 2 uids (slot 0 is reserved)");
}

Account AccountStore::get_or_create(std::string_view external_id) { return get_or_create_named(external_id, {}); }

Account AccountStore::get_or_create_named(std::string_view external_id, std::string_view name) {
  std::lock_guard lock(mu_);
  if (std::optional<Account> found = find_where("external_id", external_id)) return *found;
  // Another connection may create the same id between the look-up above and here: the
  // write lock taken by the transaction makes the second look-up final.
  Transaction tx(db_);
  if (std::optional<Account> found = find_where("external_id", external_id)) return *found;
  Account created = create_locked(external_id, static_cast<int64_t>(std::time(nullptr)), name);
  tx.commit();
  audit::account(audit::AccountActivity::create, created.name, created.external_id);
  return created;
}

bool AccountStore::was_deleted(std::string_view name) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare("SELECT 1 FROM deleted_accounts WHERE name = ?1");
  st.bind(1, name);
  return st.step();
}

std::optional<Account> AccountStore::find(std::string_view external_id) {
  std::lock_guard lock(mu_);
  return find_where("external_id", external_id);
}

std::optional<Account> AccountStore::find_by_name(std::string_view name) {
  std::lock_guard lock(mu_);
  return find_where("name", name);
}

std::optional<Account> AccountStore::find_by_name_or_id(std::string_view user) {
  std::lock_guard lock(mu_);
  if (std::optional<Account> a = find_where("name", user)) return a;
  return find_where("external_id", user);
}

std::vector<Account> AccountStore::list() {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare(std::string(kSelectAccount) + "ORDER BY uid");
  std::vector<Account> out;
  while (st.step()) out.push_back(account_from_row(st));
  return out;
}

size_t AccountStore::count() {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(db_.query_int64("SELECT COUNT(*) FROM accounts"));
}

void AccountStore::limit_accounts(size_t max_accounts) {
  std::lock_guard lock(mu_);
  max_accounts_ = max_accounts;
}

std::optional<AccountsFull> AccountStore::full() {
  std::lock_guard lock(mu_);
  return full_locked();
}

bool AccountStore::touch(std::string_view name, int64_t now) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare("UPDATE accounts SET last_seen = ?1 WHERE name = ?2");
  st.bind(1, now).bind(2, name);
  st.step();
  return db_.changes() > 0;
}

std::optional<Account> AccountStore::remove(std::string_view name, int64_t now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  std::optional<Account> account = find_where("name", name);
  if (!account) return std::nullopt;
  Statement keep = db_.prepare(
      "INSERT INTO deleted_accounts (name, external_id, uid, created, deleted) VALUES (?1, ?2, ?3, ?4, ?5)");
  keep.bind(1, account->name).bind(2, account->external_id).bind(3, int64_t{account->uid});
  keep.bind(4, account->created).bind(5, now);
  keep.step();
  for (const char* sql : {"DELETE FROM accounts WHERE name = ?1", "DELETE FROM processes WHERE account = ?1",
                          "DELETE FROM chat_sessions WHERE account = ?1"}) {
    Statement st = db_.prepare(sql);
    st.bind(1, name);
    st.step();
  }
  tx.commit();
  audit::account(audit::AccountActivity::remove, account->name, account->external_id);
  return account;
}

// column is one of our own constants, never user input.
std::optional<Account> AccountStore::find_where(std::string_view column, std::string_view value) {
  Statement st = db_.prepare(std::string(kSelectAccount) + "WHERE " + std::string(column) + " = ?1");
  st.bind(1, value);
  if (!st.step()) return std::nullopt;
  return account_from_row(st);
}

Account AccountStore::create_locked(std::string_view external_id, int64_t now, std::string_view wanted_name) {
  Account a;
  a.external_id = std::string(external_id);
  a.name = free_name_locked(external_id, wanted_name);
  a.uid = next_uid_locked();
  a.gid = a.uid;
  a.home_dir = "volumes/" + a.name + "/home";
  a.created = a.last_seen = now;
  Statement st =
      db_.prepare("INSERT INTO accounts (external_id, name, uid, created, last_seen) VALUES (?1, ?2, ?3, ?4, ?5)");
  st.bind(1, external_id).bind(2, a.name).bind(3, int64_t{a.uid}).bind(4, now).bind(5, now);
  st.step();
  return a;
}

// The usual 6-digit hash, lengthened in the (astronomically unlikely) case that another id
// already holds the name.
std::string AccountStore::free_name_locked(std::string_view external_id, std::string_view wanted_name) {
  if (!wanted_name.empty() && is_account_name_of(external_id, wanted_name) && !name_taken_locked(wanted_name))
    return std::string(wanted_name);
  for (size_t chars = kAccountNameHashChars; chars <= kAccountNameHashMax; ++chars) {
    std::string name = account_name(external_id, chars);
    if (!name_taken_locked(name)) return name;
  }
  throw Error("no free account name for external id (every hash length is taken)");
}

bool AccountStore::name_taken_locked(std::string_view name) {
  Statement taken =
      db_.prepare("SELECT 1 FROM accounts WHERE name = ?1 UNION ALL SELECT 1 FROM deleted_accounts WHERE name = ?1");
  taken.bind(1, name);
  return taken.step();
}

// One past the highest uid ever given (deleted accounts' included), so a uid is never handed
// out twice. Slot 0 is `agentbox run`'s.
uid_t AccountStore::next_uid_locked() {
  std::optional<uid_t> uid;
  if (std::optional<AccountsFull> full = full_locked(&uid)) throw *full;
  return *uid;
}

std::optional<AccountsFull> AccountStore::full_locked(std::optional<uid_t>* next_uid) {
  if (max_accounts_ > 0) {
    const auto held = static_cast<size_t>(db_.query_int64("SELECT COUNT(*) FROM accounts"));
    if (held >= max_accounts_)
      return AccountsFull(AccountsFull::Limit::max_accounts,
                          "this node holds " + std::to_string(held) +
                              " accounts, its limit ([accounts] max_accounts = " + std::to_string(max_accounts_) +
                              "): no new account can be made");
  }
  const int64_t first = int64_t{range_.base} + 1;
  const int64_t end = int64_t{range_.base} + range_.count;  // exclusive
  // Each table's own MAX over the range: SQLite answers it from the uid index's last entry. A
  // MAX over their UNION walked the whole range instead, ~8 ms per new account at 70,000.
  Statement st = db_.prepare(
      "SELECT MAX(m) FROM (SELECT MAX(uid) AS m FROM accounts WHERE uid >= ?1 AND uid < ?2 "
      "UNION ALL SELECT MAX(uid) FROM deleted_accounts WHERE uid >= ?1 AND uid < ?2)");
  st.bind(1, first).bind(2, end);
  st.step();
  std::optional<int64_t> highest = st.column_optional_int64(0);
  int64_t uid = highest ? *highest + 1 : first;
  if (uid >= end)
    return AccountsFull(AccountsFull::Limit::uid_range,
                        "the uid range " + std::to_string(first) + "-" + std::to_string(end - 1) +
                            " is exhausted: no uid for a new account (widen it with [accounts] uid_count)");
  if (next_uid) *next_uid = static_cast<uid_t>(uid);
  return std::nullopt;
}

}  // namespace agentbox
