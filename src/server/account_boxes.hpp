#pragma once
// The daemon's BoxPort: an account name → its box (BoxManager), started on first use from the
// spec its account and the configured limits make. ProcessTable spawns through this.
#include <map>
#include <mutex>
#include <string>

#include "box/box_manager.hpp"
#include "exec/process_table.hpp"
#include "server/caller.hpp"
#include "store/account_store.hpp"

namespace agentbox::server {

class AccountBoxes : public exec::BoxPort {
 public:
  AccountBoxes(BoxManager& manager, AccountStore& accounts, CallerDirectory& callers,
               Limits limits);

  // The box an account gets: its name, uid, home; the configured limits; loopback-only network.
  BoxSpec spec_for(const Account& account) const;

  SpawnResult spawn(const std::string& account, const SpawnRequest& req,
                    std::span<const int> stdio) override;
  void signal(const std::string& account, pid_t pid, int sig) override;

 private:
  const BoxSpec& spec_of(const std::string& account);

  BoxManager& manager_;
  AccountStore& accounts_;
  CallerDirectory& callers_;
  Limits limits_;
  std::mutex mu_;
  std::map<std::string, BoxSpec> specs_;  // by account name; an account never changes
};

}  // namespace agentbox::server
