#include "accounts/session_cwds.hpp"

#include <algorithm>

namespace agentbox::accounts {

SessionCwds::SessionCwds(size_t per_account) : per_account_(std::max<size_t>(per_account, 1)) {}

std::optional<std::string> SessionCwds::find(const std::string& account, const std::string& session) {
  std::lock_guard lock(mu_);
  auto it = cwds_.find({account, session});
  if (it == cwds_.end()) return std::nullopt;
  return it->second.cwd;
}

void SessionCwds::set(const std::string& account, const std::string& session, std::string cwd) {
  std::lock_guard lock(mu_);
  cwds_[{account, session}] = Cwd{std::move(cwd), ++clock_};
  // One account's sessions are a contiguous range of the map: past the bound, its least
  // recently set cwd is forgotten.
  auto first = cwds_.lower_bound({account, std::string()});
  size_t count = 0;
  auto oldest = first;
  for (auto it = first; it != cwds_.end() && it->first.first == account; ++it, ++count)
    if (it->second.set < oldest->second.set) oldest = it;
  if (count > per_account_) cwds_.erase(oldest);
}

void SessionCwds::forget(const std::string& account) {
  std::lock_guard lock(mu_);
  std::erase_if(cwds_, [&](const auto& entry) { return entry.first.first == account; });
}

}  // namespace agentbox::accounts
