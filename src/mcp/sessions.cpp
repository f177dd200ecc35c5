#include "mcp/sessions.hpp"

#include "util/random_hex.hpp"

namespace agentbox::mcp {

std::string Sessions::open(const std::string& user) {
  std::string id = random_hex(16);
  std::lock_guard lock(mu_);
  while (sessions_.size() >= capacity_ && !recent_.empty()) {
    sessions_.erase(recent_.back());
    recent_.pop_back();
  }
  recent_.push_front(id);
  sessions_[id] = Entry{user, recent_.begin()};
  return id;
}

bool Sessions::belongs(const std::string& id, const std::string& user) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.user != user) return false;
  recent_.splice(recent_.begin(), recent_, it->second.order);
  return true;
}

bool Sessions::close(const std::string& id, const std::string& user) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.user != user) return false;
  recent_.erase(it->second.order);
  sessions_.erase(it);
  return true;
}

}  // namespace agentbox::mcp
