#pragma once
// Which Claude Code session continues which chat, per account: the agent resumes a chat's
// session on its next turn (`claude --resume ID`), also after the daemon restarts. One row per
// (account, chat); the newest session id wins. Safe from several threads.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "store/sqlite.hpp"

namespace agentbox {

class ChatSessions {
 public:
  explicit ChatSessions(Db db);  // its own connection (open_state_db)

  std::optional<std::string> find(std::string_view account, std::string_view chat);
  // Records (or replaces) the chat's session; now in unix seconds.
  void remember(std::string_view account, std::string_view chat, std::string_view session_id, int64_t now);
  // The chat starts over (its session is unknown to the CLI).
  void forget(std::string_view account, std::string_view chat);

 private:
  std::mutex mu_;  // guards db_
  Db db_;
};

}  // namespace agentbox
