#include "store/chat_sessions.hpp"

namespace agentbox {

ChatSessions::ChatSessions(Db db) : db_(std::move(db)) {}

std::optional<std::string> ChatSessions::find(std::string_view account, std::string_view chat) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached("SELECT claude_session_id FROM chat_sessions WHERE account = ?1 AND chat_id = ?2");
  st->bind(1, account).bind(2, chat);
  std::optional<std::string> id;
  if (st->step()) id = st->column_text(0);
  return id;
}

void ChatSessions::remember(std::string_view account, std::string_view chat, std::string_view session_id, int64_t now) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached(
      "INSERT INTO chat_sessions (account, chat_id, claude_session_id, updated) VALUES (?1, ?2, ?3, ?4) "
      "ON CONFLICT (account, chat_id) DO UPDATE SET claude_session_id = excluded.claude_session_id, "
      "updated = excluded.updated");
  st->bind(1, account).bind(2, chat).bind(3, session_id).bind(4, now);
  st->step();
}

void ChatSessions::forget(std::string_view account, std::string_view chat) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached("DELETE FROM chat_sessions WHERE account = ?1 AND chat_id = ?2");
  st->bind(1, account).bind(2, chat);
  st->step();
}

}  // namespace agentbox
