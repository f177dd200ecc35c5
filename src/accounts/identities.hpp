#pragma once
// External user ids → the store's accounts. The recently used ones are kept in memory (an
// account never changes once made), so a request of a known user does no SQL; past `known_ids`
// the least recently used are forgotten and read from the store again on their next request.
// last_seen is written at most once a minute per account.
//
// Runs on: any thread. The memory is locked briefly (mu_); the store's statements run outside
// the lock on the calling thread, which for a user not in memory is a pool thread, never the
// API's io thread (accounts/caller_routes.hpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "store/account_store.hpp"
#include "util/lru_cache.hpp"

namespace agentbox::accounts {

class Identities {
 public:
  Identities(AccountStore& store, size_t known_ids);

  // The account of external_id when it is in memory and its last_seen needs no write at `now`
  // (unix seconds): answering costs memory only.
  std::optional<Account> cached(std::string_view external_id, int64_t now);
  // The account of external_id: from memory, else from the store (kept then); nullopt when
  // this node holds none.
  std::optional<Account> find(std::string_view external_id);
  // Makes the account of external_id (the store's get_or_create) and keeps it.
  Account create(std::string_view external_id);
  // Records activity: last_seen written when the last write is a minute old.
  void touch(const Account& account, int64_t now);
  // The id names no account here any more (deleted, moved away): its next request asks the store.
  void forget(std::string_view external_id);

  size_t size();

 private:
  struct Known {
    Account account;
    int64_t touched = 0;  // unix seconds of the last last_seen write
  };
  void keep(const Account& account);

  AccountStore& store_;
  std::mutex mu_;                                                               // guards known_
  LruCache<std::string, Known, TransparentStringHash, std::equal_to<>> known_;  // by external id
};

}  // namespace agentbox::accounts
