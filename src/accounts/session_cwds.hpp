#pragma once
// Each session's working directory (X-Session-Id → the cwd as the box sees it), per account.
// An account keeps at most `per_account`; past it the least recently set is forgotten (that
// session starts from the home again). One account's sessions never reach another's.
//
// Runs on: any thread (mu_, held for memory operations only).
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace agentbox::accounts {

class SessionCwds {
 public:
  explicit SessionCwds(size_t per_account);

  std::optional<std::string> find(const std::string& account, const std::string& session);
  void set(const std::string& account, const std::string& session, std::string cwd);
  // Every session of the account (it is being deleted).
  void forget(const std::string& account);

 private:
  struct Cwd {
    std::string cwd;
    uint64_t set = 0;  // clock_ when set: the smallest of an account's is forgotten first
  };

  size_t per_account_;
  std::mutex mu_;  // guards clock_ and cwds_
  uint64_t clock_ = 0;
  std::map<std::pair<std::string, std::string>, Cwd> cwds_;  // (account, session) → cwd
};

}  // namespace agentbox::accounts
