#pragma once
// The live sessions of one server, for shutdown (the connection limits count in
// connection_table.hpp, takeovers included). Sessions add themselves when they start and leave
// when the last of their members is destroyed (SessionRegistration); shutdown copies the list
// under the lock and acts outside it.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace agentbox::http {

class AnySession;

class SessionRegistry {
 public:
  void add(AnySession* key, std::weak_ptr<AnySession> session);
  void remove(AnySession* key);
  std::size_t size() const;
  std::vector<std::shared_ptr<AnySession>> snapshot() const;
  // True when the registry became empty before the deadline.
  bool wait_empty_until(std::chrono::steady_clock::time_point deadline) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable emptied_;
  std::unordered_map<AnySession*, std::weak_ptr<AnySession>> sessions_;
};

// Removes a session from its registry when destroyed. A session declares it before its socket
// and timer, so it runs after they are gone: shutdown destroys the io_context once the registry
// is empty, and a session whose last reference a pool thread drops may still be destroying its
// timer (which calls into the io_context) after its own destructor's body has run.
class SessionRegistration {
 public:
  SessionRegistration(SessionRegistry& registry, AnySession* key) : registry_(registry), key_(key) {}
  ~SessionRegistration() { registry_.remove(key_); }
  SessionRegistration(const SessionRegistration&) = delete;
  SessionRegistration& operator=(const SessionRegistration&) = delete;

 private:
  SessionRegistry& registry_;
  AnySession* const key_;
};

}  // namespace agentbox::http
