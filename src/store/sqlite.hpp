#pragma once
// A thin owner layer over libsqlite3: a connection (Db), a prepared statement (Statement) and
// a transaction guard (Transaction). Failures throw DbError carrying SQLite's extended result
// code, so callers can tell a UNIQUE violation from a broken disk.
//
// Threads: a Db and its Statements belong to one thread at a time (the connection is opened
// without SQLite's own mutex); stores that are shared lock around their Db.
#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "util/error.hpp"

namespace agentbox {

class DbError : public Error {
 public:
  DbError(std::string message, int result_code) : Error(std::move(message)), result_code_(result_code) {}
  int result_code() const noexcept { return result_code_; }  // extended, e.g. SQLITE_CONSTRAINT_UNIQUE
  // The state filesystem had no room for the write (SQLITE_FULL): the statement changed nothing.
  bool disk_full() const noexcept { return (result_code_ & 0xff) == SQLITE_FULL; }

 private:
  int result_code_;
};

class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}

  // Parameters are numbered from 1, as in SQL's "?1".
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, std::string_view value);
  Statement& bind_null(int index);
  Statement& bind(int index, const std::optional<int64_t>& value) {
    return value ? bind(index, *value) : bind_null(index);
  }

  // Runs to the next row: true while a row is ready, false once done.
  bool step();
  // Back to the start with the same bindings cleared, for reuse.
  void reset();

  int64_t column_int64(int column) const;
  std::string column_text(int column) const;
  std::optional<int64_t> column_optional_int64(int column) const;

 private:
  struct Finalizer {
    void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
  };
  [[noreturn]] void fail(std::string_view op, int rc) const;

  sqlite3* db_;
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
};

// A statement borrowed from its connection's cache (Db::prepare_cached). Letting go of it
// resets it and clears its bindings, so a SELECT read to its end or not holds no read open
// (which would keep the WAL from being checkpointed).
class CachedStatement {
 public:
  explicit CachedStatement(Statement& st) : st_(&st) {}
  ~CachedStatement() { st_->reset(); }
  CachedStatement(const CachedStatement&) = delete;
  CachedStatement& operator=(const CachedStatement&) = delete;
  Statement& operator*() const { return *st_; }
  Statement* operator->() const { return st_; }

 private:
  Statement* st_;
};

class Db {
 public:
  // Opens (creating if needed, mode 0600) the database at path in WAL mode with foreign keys
  // on. A writer waits up to busy_timeout for another connection's write lock.
  static Db open(const std::string& path, std::chrono::milliseconds busy_timeout = std::chrono::seconds(10));

  // Runs one or more statements that return no rows (schema, PRAGMA, BEGIN ...).
  void exec(std::string_view sql);
  Statement prepare(std::string_view sql);
  // The same statement, compiled once per connection and kept: for what runs on every request
  // (compiling is most of the cost of a one-row statement). One borrower at a time per text.
  CachedStatement prepare_cached(std::string_view sql);
  // Convenience for single-value queries such as "PRAGMA user_version".
  int64_t query_int64(std::string_view sql);

  int changes() const noexcept { return sqlite3_changes(db_.get()); }
  sqlite3* get() const noexcept { return db_.get(); }

 private:
  struct Closer {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
  };
  explicit Db(sqlite3* db) : db_(db) {}
  Statement compile(std::string_view sql, unsigned flags);  // sqlite3_prepare_v3

  std::unique_ptr<sqlite3, Closer> db_;
  // After db_: destroyed first, so every statement is finalized before the connection closes.
  std::unordered_map<std::string, Statement> cached_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back unless commit() ran. IMMEDIATE takes the write lock
// at the start, so a read-then-write inside never fails halfway with SQLITE_BUSY; waiting for
// the lock uses the connection's busy timeout.
class Transaction {
 public:
  explicit Transaction(Db& db);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Db& db_;
  bool open_ = true;
};

}  // namespace agentbox
