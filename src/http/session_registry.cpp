#include "http/session_registry.hpp"

namespace agentbox::http {

void SessionRegistry::add(AnySession* key, std::weak_ptr<AnySession> session) {
  std::lock_guard lock(mu_);
  sessions_.emplace(key, std::move(session));
}

void SessionRegistry::remove(AnySession* key) {
  std::lock_guard lock(mu_);
  sessions_.erase(key);
  if (sessions_.empty()) emptied_.notify_all();
}

std::size_t SessionRegistry::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

std::vector<std::shared_ptr<AnySession>> SessionRegistry::snapshot() const {
  std::vector<std::shared_ptr<AnySession>> out;
  std::lock_guard lock(mu_);
  out.reserve(sessions_.size());
  for (const auto& [key, weak] : sessions_)
    if (auto s = weak.lock()) out.push_back(std::move(s));
  return out;
}

bool SessionRegistry::wait_empty_until(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mu_);
  return emptied_.wait_until(lock, deadline, [&] { return sessions_.empty(); });
}

}  // namespace agentbox::http
