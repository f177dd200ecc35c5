#pragma once
// Who a request is for: the account named by X-User-Id (created on first sight, with its own
// uid and home), its confined home and the session's working directory (X-Session-Id). Every
// route that touches a box or a file starts with CallerDirectory::resolve().
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "fs/confined_dir.hpp"
#include "server/request.hpp"
#include "store/account_store.hpp"

namespace agentbox::server {

struct Caller {
  Account account;
  std::shared_ptr<const ConfinedDir> home;  // the account's home; all file access goes through it
  std::string box_home;                     // "/home/NAME": the home as the box sees it
  std::string session_id;                   // X-Session-Id, "" when absent
  std::string cwd;                          // the session's cwd as the box sees it (default box_home)
};

class CallerDirectory {
 public:
  // state_dir holds homes/NAME for every account.
  CallerDirectory(AccountStore& accounts, std::string state_dir);

  // The caller of req. HttpError 400 without a non-empty X-User-Id. Creates the account and
  // its home (owned by the account's uid, 0700) on first sight; records activity.
  Caller resolve(const Request& req);

  // POST /files/cwd: the session's cwd becomes `path` (any accepted form); it must be an
  // existing directory inside the home (FsError otherwise). Without a session id the cwd
  // cannot be kept: HttpError 400.
  std::string set_cwd(const Caller& caller, std::string_view path);

  // Host path of the account's home.
  std::string host_home(const Account& account) const;

 private:
  std::shared_ptr<const ConfinedDir> home_of(const Account& account);
  // The account for an external id: from memory after the first request (accounts never
  // change), so the hot path does no SQL; last_seen is written at most once a minute.
  Account account_of(std::string_view external_id);

  AccountStore& accounts_;
  std::string state_dir_;
  std::mutex mu_;  // guards homes_ and cwds_
  std::map<std::string, std::shared_ptr<const ConfinedDir>> homes_;  // by account name
  std::map<std::pair<std::string, std::string>, std::string> cwds_;  // (account, session) → cwd
  struct Known {
    Account account;
    int64_t touched = 0;  // unix seconds of the last last_seen write
  };
  std::map<std::string, Known, std::less<>> known_;  // by external id
};

}  // namespace agentbox::server
