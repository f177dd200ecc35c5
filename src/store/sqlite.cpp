#include "store/sqlite.hpp"

#include <fcntl.h>

#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

// The statement text for messages: first line-ish, bounded.
std::string sql_excerpt(std::string_view sql) {
  std::string out;
  for (char c : sql) {
    if (out.size() >= 60) {
      out += "...";
      break;
    }
    if (c == '\n' || c == '\t') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  return out;
}

[[noreturn]] void throw_db(sqlite3* db, std::string_view op, int rc) {
  std::string msg = "sqlite: ";
  msg += op;
  msg += ": ";
  msg += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  throw DbError(std::move(msg), db ? sqlite3_extended_errcode(db) : rc);
}

}  // namespace

// ---- Statement

void Statement::fail(std::string_view op, int rc) const {
  throw_db(db_, std::string(op) + "(" + sql_excerpt(sqlite3_sql(stmt_.get())) + ")", rc);
}

Statement& Statement::bind(int index, int64_t value) {
  if (int rc = sqlite3_bind_int64(stmt_.get(), index, value); rc != SQLITE_OK) fail("bind", rc);
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  int rc = sqlite3_bind_text64(stmt_.get(), index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) fail("bind", rc);
  return *this;
}

Statement& Statement::bind_null(int index) {
  if (int rc = sqlite3_bind_null(stmt_.get(), index); rc != SQLITE_OK) fail("bind", rc);
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail("step", rc);
}

void Statement::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

int64_t Statement::column_int64(int column) const { return sqlite3_column_int64(stmt_.get(), column); }

std::string Statement::column_text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_.get(), column);
  if (!text) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_.get(), column)));
}

std::optional<int64_t> Statement::column_optional_int64(int column) const {
  if (sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL) return std::nullopt;
  return column_int64(column);
}

// ---- Db

Db Db::open(const std::string& path, std::chrono::milliseconds busy_timeout) {
  // Create the file ourselves so it (and the -wal/-shm files SQLite derives from it) is 0600:
  // it holds every user's external id.
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw sys_error("open(" + path + ")");
  fd.reset();

  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Db db(raw);  // owns raw even when the open failed
  if (rc != SQLITE_OK) throw_db(raw, "open(" + path + ")", rc);

  sqlite3_busy_timeout(raw, static_cast<int>(busy_timeout.count()));
  Statement wal = db.prepare("PRAGMA journal_mode = WAL");
  if (!wal.step() || wal.column_text(0) != "wal")
    throw DbError("sqlite: " + path + ": could not switch to WAL mode", SQLITE_ERROR);
  // WAL + NORMAL: never corrupt; a power loss may drop the last commits, an app crash cannot.
  db.exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;");
  return db;
}

void Db::exec(std::string_view sql) {
  std::string text(sql);  // sqlite3_exec needs a terminated string
  char* err = nullptr;
  int rc = sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = "sqlite: exec(" + sql_excerpt(sql) + "): " + (err ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    throw DbError(std::move(msg), sqlite3_extended_errcode(db_.get()));
  }
}

Statement Db::compile(std::string_view sql, unsigned flags) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_.get(), sql.data(), static_cast<int>(sql.size()), flags, &stmt, nullptr);
  if (rc != SQLITE_OK) throw_db(db_.get(), "prepare(" + sql_excerpt(sql) + ")", rc);
  return Statement(db_.get(), stmt);
}

Statement Db::prepare(std::string_view sql) { return compile(sql, 0); }

CachedStatement Db::prepare_cached(std::string_view sql) {
  auto it = cached_.find(std::string(sql));
  if (it == cached_.end()) it = cached_.emplace(std::string(sql), compile(sql, SQLITE_PREPARE_PERSISTENT)).first;
  return CachedStatement(it->second);
}

int64_t Db::query_int64(std::string_view sql) {
  Statement st = prepare(sql);
  if (!st.step()) throw DbError("sqlite: " + sql_excerpt(sql) + ": no row", SQLITE_ERROR);
  return st.column_int64(0);
}

// ---- Transaction

Transaction::Transaction(Db& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!open_) return;
  try {
    db_.exec("ROLLBACK");
  } catch (const Error&) {
    // Already rolled back by SQLite (some errors end the transaction themselves).
  }
}

void Transaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace agentbox
