#pragma once
// Who a request is for: the account named by X-User-Id (created on first sight, with its own
// uid and home), its confined home and the session's working directory (X-Session-Id). Every
// route that touches a box or a file starts with AccountDirectory::resolve().
#include <chrono>
#include <functional>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "fs/confined_dir.hpp"
#include "http/request.hpp"
#include "store/account_store.hpp"
#include "util/lru_cache.hpp"
#include "volumes/account_volumes.hpp"

namespace agentbox::accounts {


struct Caller {
  Account account;
  std::shared_ptr<const ConfinedDir> home;  // the account's home; all file access goes through it
  std::string box_home;                     // "/home/NAME": the home as the box sees it
  std::string session_id;                   // X-Session-Id, "" when absent
  std::string cwd;                          // the session's cwd as the box sees it (default box_home)
};

// What AccountDirectory keeps in memory. Past these bounds it forgets the least recently used
// entries and loads them again on the next request: the store and the homes on disk are the
// truth, so any number of user ids costs the daemon a bounded number of descriptors.
struct CallerCacheLimits {
  size_t open_homes = 256;               // home directory descriptors kept open ([accounts] open_homes)
  size_t known_ids = 4096;               // external id → account entries kept
  std::chrono::seconds home_idle{600};   // a home unused this long is closed (at the next request)
  size_t session_cwds = 256;             // cwds kept per account; past it the least recently set goes
};

// The external user id a request names: X-User-Id or X-OpenWebUI-User-Id (Open WebUI's generic
// tool servers send the latter), the same account for the same value; with query_allowed also
// the `user_id` query parameter (how Open WebUI's proxy names the user of a WebSocket). A header
// repeated, or two sources that disagree, is HttpError 400: a proxy that appends a header
// instead of replacing it must not let the client pick the account. None, empty, or over
// 256 bytes: 400.
std::string user_id_of(const http::Request& req, bool query_allowed = false);

class AccountDirectory {
 public:
  // Every account's home is in its volume (volumes/account_volumes.hpp); without `volumes`, plain
  // directories under state_dir (no quota).
  AccountDirectory(AccountStore& accounts, std::string state_dir, CallerCacheLimits limits = {},
                  std::shared_ptr<AccountVolumes> volumes = nullptr);

  // The caller of req (user_id_of). Creates the account and its home (owned by the account's
  // uid, 0700) on first sight; records activity. The session is X-Session-Id, else
  // X-Terminal-Context-Id; a session cwd that is no longer a directory falls back to the home.
  Caller resolve(const http::Request& req, bool query_user_allowed = false);

  // POST /files/cwd: the session's cwd becomes `path` (any accepted form); it must be an
  // existing directory inside the home (FsError otherwise). Without a session id the cwd
  // cannot be kept: HttpError 400.
  std::string set_cwd(const Caller& caller, std::string_view path);

  // Host path of the account's home.
  std::string host_home(const Account& account) const;
  // The account's home (opened, its volume ready), as resolve() gives it.
  std::shared_ptr<const ConfinedDir> home(const Account& account) { return home_of(account); }
  // The account's volume, ready (mounted): its home, trash and the daemon's files for it.
  VolumePaths volume_of(const Account& account);
  AccountVolumes& volumes() { return *volumes_; }

  // DELETE /admin/accounts: from begin_delete on, every request for the account is refused with
  // 409 and its open home and session cwds are forgotten; after end_delete its external id
  // makes a new account on its next request (the old name stays refused).
  void begin_delete(const Account& account);
  void end_delete(const Account& account);

  // Entries held now, never above CallerCacheLimits: for /metrics and tests.
  struct CacheSizes {
    size_t open_homes = 0;
    size_t known_ids = 0;
  };
  CacheSizes cache_sizes();

  // A cluster node's placement guard: asked before an account is created for an external id
  // this node does not hold; it throws (HttpError 421) to refuse. Set before serving.
  void set_new_account_check(std::function<void(std::string_view external_id)> check) {
    new_account_check_ = std::move(check);
  }
  // Asked first for every request's external id, held or not: a node refuses users being moved
  // or moved away (accounts/move_gate.hpp) by throwing. Set before serving.
  void set_account_gate(std::function<void(std::string_view external_id)> gate) { account_gate_ = std::move(gate); }
  // The same refusal for the operator's routes (an account being moved is not deleted meanwhile).
  void check_gate(std::string_view external_id) const {
    if (account_gate_) account_gate_(external_id);
  }

 private:
  // The account's home, opened again if it was dropped from homes_. A request holds its own
  // reference, so dropping one never closes a home in use.
  std::shared_ptr<const ConfinedDir> home_of(const Account& account);
  // The account for an external id: from memory while it is in known_ (accounts never change),
  // so the hot path does no SQL; last_seen is written at most once a minute.
  Account account_of(std::string_view external_id);

  struct Home {
    std::shared_ptr<const ConfinedDir> dir;
    std::chrono::steady_clock::time_point used;
  };
  struct Known {
    Account account;
    int64_t touched = 0;  // unix seconds of the last last_seen write
  };
  template <class V>
  using StringKeyed = LruCache<std::string, V, TransparentStringHash, std::equal_to<>>;

  // HttpError 409 when the account is being deleted or was; under mu_.
  void refuse_if_deleted_locked(const Account& account) const;

  struct SessionCwd {
    std::string cwd;
    uint64_t set = 0;  // cwd_clock_ when set: the smallest of an account's is forgotten first
  };

  AccountStore& accounts_;
  std::string state_dir_;
  std::shared_ptr<AccountVolumes> volumes_;
  std::chrono::seconds home_idle_;
  size_t session_cwds_;
  std::function<void(std::string_view)> new_account_check_;
  std::function<void(std::string_view)> account_gate_;
  std::mutex mu_;  // guards homes_, known_, cwd_clock_, cwds_ and deleted_
  StringKeyed<Home> homes_;    // by account name
  StringKeyed<Known> known_;   // by external id
  uint64_t cwd_clock_ = 0;
  std::map<std::pair<std::string, std::string>, SessionCwd> cwds_;  // (account, session) → cwd
  std::set<std::string> deleted_;  // names of accounts deleted (or being) in this run
};

}  // namespace agentbox::accounts
