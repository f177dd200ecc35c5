#pragma once
// MCP sessions (2025-11-25 Streamable HTTP): the Mcp-Session-Id an `initialize` hands out, and
// the user who opened it. A session is that user's alone: another user naming it is told it
// does not exist (404), exactly as a session that was deleted or never was, so ids leak nothing.
// Held in memory (a restart ends them; clients then initialize again, as the spec has them
// do on 404), at most `capacity`, the least recently used going first.
//
// Runs on: any thread (one mutex).
#include <chrono>
#include <cstddef>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace agentbox::mcp {

class Sessions {
 public:
  explicit Sessions(std::size_t capacity = 10000) : capacity_(capacity) {}

  // A new session of user: its id (unguessable, 32 hex digits).
  std::string open(const std::string& user);
  // True when id is a live session of user (and marks it used).
  bool belongs(const std::string& id, const std::string& user);
  // Ends user's session id; false when there is no such session of user's.
  bool close(const std::string& id, const std::string& user);

 private:
  struct Entry {
    std::string user;
    std::list<std::string>::iterator order;  // place in recent_
  };
  std::mutex mu_;
  std::size_t capacity_;
  std::unordered_map<std::string, Entry> sessions_;
  std::list<std::string> recent_;  // ids, most recently used first
};

}  // namespace agentbox::mcp
