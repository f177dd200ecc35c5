#include "store/move_store.hpp"

namespace agentbox {
namespace {

constexpr std::string_view kSelectOut =
    "SELECT id, external_id, name, to_node, to_server, state, started FROM moves_out ";
constexpr std::string_view kSelectIn = "SELECT id, external_id, name, from_node, state, started FROM moves_in ";

MoveOut out_from_row(const Statement& row) {
  return {row.column_text(0), row.column_text(1), row.column_text(2), row.column_text(3),
          row.column_text(4), row.column_text(5), row.column_int64(6)};
}

MoveIn in_from_row(const Statement& row) {
  return {row.column_text(0), row.column_text(1), row.column_text(2),
          row.column_text(3), row.column_text(4), row.column_int64(5)};
}

}  // namespace

MoveStore::MoveStore(Db db) : db_(std::move(db)) {}

std::optional<MoveOut> MoveStore::open_out(std::string_view external_id) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare(std::string(kSelectOut) + "WHERE external_id = ?1 AND state != 'moved'");
  st.bind(1, external_id);
  if (!st.step()) return std::nullopt;
  return out_from_row(st);
}

void MoveStore::insert_out(const MoveOut& m) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare(
      "INSERT INTO moves_out (id, external_id, name, to_node, to_server, state, started) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  st.bind(1, m.id).bind(2, m.external_id).bind(3, m.name).bind(4, m.to_node).bind(5, m.to_server);
  st.bind(6, m.state).bind(7, m.started);
  st.step();
}

void MoveStore::set_out_state(std::string_view id, std::string_view state, int64_t now) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare("UPDATE moves_out SET state = ?2, ended = ?3 WHERE id = ?1");
  st.bind(1, id).bind(2, state).bind(3, now);
  st.step();
}

std::vector<MoveOut> MoveStore::outs() {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare(std::string(kSelectOut) + "ORDER BY started, rowid");
  std::vector<MoveOut> out;
  while (st.step()) out.push_back(out_from_row(st));
  return out;
}

MovedRecords MoveStore::records_of(std::string_view account) {
  std::lock_guard lock(mu_);
  MovedRecords r;
  Statement p = db_.prepare(
      "SELECT id, account, command, status, exit_code, started, ended, log_path, chat FROM processes "
      "WHERE account = ?1 "
      "ORDER BY started, id");
  p.bind(1, account);
  while (p.step()) {
    ProcessRecord rec = process_record_from_row(p);
    if (rec.status == ProcessStatus::running) {
      // Its box stopped before the move read this: it will never end by itself.
      rec.status = ProcessStatus::lost;
      if (!rec.ended) rec.ended = rec.started;
    }
    r.processes.push_back(std::move(rec));
  }
  Statement c = db_.prepare("SELECT chat_id, claude_session_id, updated FROM chat_sessions WHERE account = ?1");
  c.bind(1, account);
  while (c.step()) r.chats.push_back({c.column_text(0), c.column_text(1), c.column_int64(2)});
  Statement t = db_.prepare(
      "SELECT day, requests, input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens "
      "FROM token_usage WHERE account = ?1 ORDER BY day");
  t.bind(1, account);
  while (t.step()) r.tokens.push_back(daily_tokens_from_row(t));
  return r;
}

std::optional<MoveIn> MoveStore::in(std::string_view id) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare(std::string(kSelectIn) + "WHERE id = ?1");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return in_from_row(st);
}

std::vector<MoveIn> MoveStore::pending_ins() {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare(std::string(kSelectIn) + "WHERE state != 'active'");
  std::vector<MoveIn> out;
  while (st.step()) out.push_back(in_from_row(st));
  return out;
}

void MoveStore::insert_in(const MoveIn& m) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  Statement st = db_.prepare(
      "INSERT INTO moves_in (id, external_id, name, from_node, state, started) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  st.bind(1, m.id).bind(2, m.external_id).bind(3, m.name).bind(4, m.from_node).bind(5, m.state).bind(6, m.started);
  st.step();
  Statement gone = db_.prepare("DELETE FROM moves_out WHERE external_id = ?1 AND state = 'moved'");
  gone.bind(1, m.external_id);
  gone.step();
  tx.commit();
}

void MoveStore::commit_in(std::string_view id, std::string_view account, const MovedRecords& r) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  Statement p = db_.prepare(
      "INSERT INTO processes (id, account, command, status, exit_code, started, ended, log_path, chat) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  for (const ProcessRecord& rec : r.processes) {
    p.reset();
    p.bind(1, rec.id).bind(2, account).bind(3, rec.command).bind(4, to_string(rec.status)).bind(5, rec.exit_code);
    p.bind(6, rec.started).bind(7, rec.ended).bind(8, rec.log_path).bind(9, rec.chat);
    p.step();
  }
  Statement c =
      db_.prepare("INSERT INTO chat_sessions (account, chat_id, claude_session_id, updated) VALUES (?1, ?2, ?3, ?4)");
  for (const ChatSessionRow& chat : r.chats) {
    c.reset();
    c.bind(1, account).bind(2, chat.chat_id).bind(3, chat.session_id).bind(4, chat.updated);
    c.step();
  }
  Statement t = db_.prepare(
      "INSERT INTO token_usage (account, day, requests, input_tokens, output_tokens, cache_creation_input_tokens, "
      "cache_read_input_tokens) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  for (const DailyTokens& d : r.tokens) {
    t.reset();
    t.bind(1, account).bind(2, d.day).bind(3, static_cast<int64_t>(d.requests));
    t.bind(4, static_cast<int64_t>(d.tokens.input_tokens)).bind(5, static_cast<int64_t>(d.tokens.output_tokens));
    t.bind(6, static_cast<int64_t>(d.tokens.cache_creation_input_tokens));
    t.bind(7, static_cast<int64_t>(d.tokens.cache_read_input_tokens));
    t.step();
  }
  Statement st =
      db_.prepare("UPDATE moves_in SET state = 'committed', name = ?2 WHERE id = ?1 AND state = 'receiving'");
  st.bind(1, id).bind(2, account);
  st.step();
  if (db_.changes() != 1) throw Error("move " + std::string(id) + " is not being received");
  tx.commit();
}

void MoveStore::set_in_state(std::string_view id, std::string_view state, int64_t now) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare("UPDATE moves_in SET state = ?2, ended = ?3 WHERE id = ?1");
  st.bind(1, id).bind(2, state).bind(3, now);
  st.step();
}

void MoveStore::remove_in(std::string_view id) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare("DELETE FROM moves_in WHERE id = ?1");
  st.bind(1, id);
  st.step();
}

}  // namespace agentbox
