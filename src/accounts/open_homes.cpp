#include "accounts/open_homes.hpp"

namespace agentbox::accounts {

OpenHomes::OpenHomes(size_t limit, std::chrono::seconds idle) : idle_(idle), homes_(limit) {}

std::shared_ptr<const ConfinedDir> OpenHomes::find(const std::string& name, Clock::time_point now) {
  std::lock_guard lock(mu_);
  // Idle homes go even below the bound.
  homes_.evict_oldest_while([&](const std::string&, const Home& h) { return now - h.used >= idle_; });
  Home* found = homes_.find(name);
  if (!found) return nullptr;
  found->used = now;
  return found->dir;
}

std::shared_ptr<const ConfinedDir> OpenHomes::keep(const std::string& name, std::shared_ptr<const ConfinedDir> home,
                                                   Clock::time_point now) {
  std::lock_guard lock(mu_);
  return homes_.insert(name, Home{std::move(home), now}).dir;
}

void OpenHomes::close(const std::string& name) {
  std::lock_guard lock(mu_);
  homes_.erase(name);
}

size_t OpenHomes::size() {
  std::lock_guard lock(mu_);
  return homes_.size();
}

}  // namespace agentbox::accounts
