#include "server/account_boxes.hpp"

#include "util/error.hpp"

namespace agentbox::server {

AccountBoxes::AccountBoxes(BoxManager& manager, AccountStore& accounts, CallerDirectory& callers,
                           Limits limits)
    : manager_(manager), accounts_(accounts), callers_(callers), limits_(limits) {}

BoxSpec AccountBoxes::spec_for(const Account& account) const {
  BoxSpec spec;
  spec.name = account.name;
  spec.hostname = "agentbox";
  spec.uid = account.uid;
  spec.gid = account.gid;
  spec.identity = IdentityMode::host_uid;
  spec.home_source = callers_.host_home(account);
  spec.home_target = "/home/" + account.name;
  spec.limits = limits_;
  spec.use_cgroup = true;
  return spec;
}

const BoxSpec& AccountBoxes::spec_of(const std::string& account) {
  std::lock_guard lock(mu_);
  if (auto it = specs_.find(account); it != specs_.end()) return it->second;
  auto found = accounts_.find_by_name(account);
  if (!found) throw Error("no account named " + account);
  return specs_.emplace(account, spec_for(*found)).first->second;
}

SpawnResult AccountBoxes::spawn(const std::string& account, const SpawnRequest& req,
                                std::span<const int> stdio) {
  return manager_.spawn(account, spec_of(account), req, stdio);
}

void AccountBoxes::signal(const std::string& account, pid_t pid, int sig) {
  if (auto box = manager_.find(account)) box->signal(pid, sig);
}

}  // namespace agentbox::server
