#pragma once
// Accounts: one per external user id, each with its own name, uid and home. Created on first
// sight, never shared: two ids never get the same name or uid.
#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/sqlite.hpp"
#include "util/error.hpp"

namespace agentbox {

// The uids accounts are drawn from: base + slot for slot in [1, count). Slot 0 (base itself)
// is reserved for `agentbox run`, so a server account never shares its uid.
struct UidRange {
  uid_t base = 1000000;
  uint32_t count = 65536;
};

struct Account {
  std::string external_id;  // as the front end sent it
  std::string name;         // e.g. "alice-3f2a9c"; user name inside the box
  uid_t uid = 0;
  gid_t gid = 0;          // = uid: every account is its own group
  std::string home_dir;   // relative to the state dir: "volumes/NAME/home" (volumes/account_volumes.hpp)
  int64_t created = 0;    // unix seconds
  int64_t last_seen = 0;  // unix seconds
};

// No room for one more account: the operator's cap ([accounts] max_accounts) or the uid range
// is used up (uids of deleted accounts are never given again). The message names the limit and
// the config key that raises it; accounts/admission.hpp answers it 503.
class AccountsFull : public Error {
 public:
  enum class Limit { max_accounts, uid_range };
  AccountsFull(Limit limit, std::string message) : Error(std::move(message)), limit_(limit) {}
  Limit limit() const noexcept { return limit_; }

 private:
  Limit limit_;
};

class AccountStore {
 public:
  // Takes its own connection (open_state_db). Safe to use from several threads; several
  // stores (or processes) on the same database file are safe too.
  AccountStore(Db db, UidRange range);

  // The account for external_id, created on first call. Concurrent calls for the same id, in
  // this or another process, return the same account. Throws AccountsFull when there is no room.
  Account get_or_create(std::string_view external_id);

  // The same, but an account made here is named `name` when that is a name of external_id
  // (store/account_name.hpp is_account_name_of) that no account, live or deleted, has had; else
  // the usual free one. For `backup restore --all`: the name the account had on a lost node.
  Account get_or_create_named(std::string_view external_id, std::string_view name);

  std::optional<Account> find(std::string_view external_id);
  std::optional<Account> find_by_name(std::string_view name);
  // An operator's way of naming an account: its name, else its external id.
  std::optional<Account> find_by_name_or_id(std::string_view user);
  std::vector<Account> list();  // ordered by uid
  size_t count();               // accounts now (one COUNT: /metrics reads it at every scrape)
  // Whether an account named `name` was deleted from this store (remove()).
  bool was_deleted(std::string_view name);

  // At most this many accounts (0: as many as the uid range holds); set before serving.
  void limit_accounts(size_t max_accounts);
  // Why one more account cannot be made now (nullopt: it can), as get_or_create would throw it.
  std::optional<AccountsFull> full();

  // Records activity (unix seconds); returns false if there is no such account.
  bool touch(std::string_view name, int64_t now);

  // Deletes the account named `name` with its process records and chat sessions, in one
  // transaction; nullopt when there is none. Its name and uid stay taken for good
  // (deleted_accounts): the same external id later gets a new account, never the old one's
  // uid or name. Usage records (tokens, network log) are kept for the operator.
  std::optional<Account> remove(std::string_view name, int64_t now);

 private:
  std::optional<Account> find_where(std::string_view column, std::string_view value);
  Account create_locked(std::string_view external_id, int64_t now, std::string_view wanted_name = {});
  std::string free_name_locked(std::string_view external_id, std::string_view wanted_name);
  bool name_taken_locked(std::string_view name);
  uid_t next_uid_locked();
  std::optional<AccountsFull> full_locked(std::optional<uid_t>* next_uid = nullptr);

  std::mutex mu_;  // guards db_: one statement sequence at a time on this connection
  Db db_;
  UidRange range_;
  size_t max_accounts_ = 0;  // guarded by mu_; 0: no cap below the uid range
};

}  // namespace agentbox
