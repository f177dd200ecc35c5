// The state database: WAL mode, private file, versioned migrations, transaction guard.
#include "store/schema.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "store/sqlite.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

using ::testing::HasSubstr;

class StoreSchemaTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"agentbox-store-schema"};
  const std::string dir_ = scratch_.path();
};

TEST_F(StoreSchemaTest, FreshDatabaseIsWalPrivateAndAtLatestVersion) {
  Db db = open_state_db(dir_);
  EXPECT_EQ(db.query_int64("PRAGMA user_version"), latest_schema_version());
  Statement mode = db.prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.step());
  EXPECT_EQ(mode.column_text(0), "wal");
  EXPECT_EQ(db.query_int64("PRAGMA foreign_keys"), 1);
  EXPECT_GT(db.query_int64("PRAGMA busy_timeout"), 0);
  for (const char* table : {"accounts", "processes", "chat_sessions", "audit"}) {
    Statement st = db.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1");
    st.bind(1, std::string_view(table));
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_int64(0), 1) << table;
  }
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/agentbox.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << "the database holds every user's external id";
}

TEST_F(StoreSchemaTest, OpeningTwiceKeepsDataAndVersion) {
  {
    Db db = open_state_db(dir_);
    db.exec("INSERT INTO accounts VALUES ('ext', 'n-000000', 1000001, 1, 1)");
  }
  Db again = open_state_db(dir_);
  EXPECT_EQ(again.query_int64("PRAGMA user_version"), latest_schema_version());
  EXPECT_EQ(again.query_int64("SELECT count(*) FROM accounts"), 1);
  migrate(again);  // a third time, on an open connection
  EXPECT_EQ(again.query_int64("SELECT count(*) FROM accounts"), 1);
}

TEST_F(StoreSchemaTest, NewerSchemaIsRefused) {
  {
    Db db = open_state_db(dir_);
    db.exec("PRAGMA user_version = " + std::to_string(latest_schema_version() + 1));
  }
  try {
    open_state_db(dir_);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("newer than this agentbox understands"));
  }
}

TEST_F(StoreSchemaTest, TransactionRollsBackUnlessCommitted) {
  Db db = open_state_db(dir_);
  {
    Transaction tx(db);
    db.exec("INSERT INTO audit (ts, kind, detail) VALUES (1, 'test', 'dropped')");
  }
  EXPECT_EQ(db.query_int64("SELECT count(*) FROM audit"), 0);
  {
    Transaction tx(db);
    db.exec("INSERT INTO audit (ts, kind, detail) VALUES (1, 'test', 'kept')");
    tx.commit();
  }
  EXPECT_EQ(db.query_int64("SELECT count(*) FROM audit"), 1);
}

TEST_F(StoreSchemaTest, ErrorsCarryTheSqliteCodeAndStatement) {
  Db db = open_state_db(dir_);
  db.exec("INSERT INTO accounts VALUES ('a', 'name-1', 1000001, 1, 1)");
  Statement dup = db.prepare("INSERT INTO accounts VALUES ('b', 'name-1', 1000002, 1, 1)");
  try {
    dup.step();
    FAIL() << "no error";
  } catch (const DbError& e) {
    EXPECT_EQ(e.result_code(), SQLITE_CONSTRAINT_UNIQUE);
    EXPECT_THAT(e.what(), HasSubstr("step(INSERT INTO accounts"));
    EXPECT_THAT(e.what(), HasSubstr("UNIQUE constraint failed: accounts.name"));
  }
  EXPECT_THROW(db.prepare("SELEC nonsense"), DbError);
  // STRICT tables refuse a value of the wrong type instead of storing it.
  EXPECT_THROW(db.exec("INSERT INTO accounts VALUES ('c', 'name-2', 'not a uid', 1, 1)"), DbError);
}

TEST_F(StoreSchemaTest, SymlinkedDatabaseIsRefused) {
  ASSERT_EQ(::symlink("/tmp/elsewhere.db", (dir_ + "/agentbox.db").c_str()), 0);
  EXPECT_THROW(open_state_db(dir_), Error);
  EXPECT_FALSE(std::filesystem::exists("/tmp/elsewhere.db"));
}

TEST_F(StoreSchemaTest, ValuesRoundTripIncludingNullAndBytes) {
  Db db = open_state_db(dir_);
  db.exec("CREATE TEMP TABLE t (s TEXT, i INTEGER)");
  Statement ins = db.prepare("INSERT INTO t VALUES (?1, ?2)");
  std::string with_nul("a\0b", 3);
  ins.bind(1, std::string_view(with_nul)).bind(2, std::optional<int64_t>());
  ins.step();
  ins.reset();
  ins.bind(1, std::string_view("x")).bind(2, int64_t{-5});
  ins.step();
  Statement sel = db.prepare("SELECT s, i FROM t ORDER BY rowid");
  ASSERT_TRUE(sel.step());
  EXPECT_EQ(sel.column_text(0), with_nul);
  EXPECT_EQ(sel.column_optional_int64(1), std::nullopt);
  ASSERT_TRUE(sel.step());
  EXPECT_EQ(sel.column_optional_int64(1), -5);
  EXPECT_FALSE(sel.step());
}

TEST_F(StoreSchemaTest, ACachedStatementIsResetWhenLetGoAndHoldsNoReadOpen) {
  Db db = open_state_db(dir_);
  db.exec("CREATE TABLE t (x INTEGER)");
  db.exec("INSERT INTO t VALUES (1), (2), (3)");
  const char* sql = "SELECT x FROM t WHERE x >= ?1 ORDER BY x";
  {
    auto st = db.prepare_cached(sql);
    st->bind(1, int64_t{2});
    ASSERT_TRUE(st->step());  // left after its first row
    EXPECT_EQ(st->column_int64(0), 2);
  }
  {
    // The same statement again, from its first row, its old binding gone (NULL matches nothing).
    auto st = db.prepare_cached(sql);
    EXPECT_FALSE(st->step());
    st->reset();
    st->bind(1, int64_t{1});
    ASSERT_TRUE(st->step());
    EXPECT_EQ(st->column_int64(0), 1);
  }
  // No read left open on the first connection: another one can checkpoint the whole WAL.
  Db other = Db::open(dir_ + "/agentbox.db", std::chrono::milliseconds(100));
  Statement checkpoint = other.prepare("PRAGMA wal_checkpoint(TRUNCATE)");
  ASSERT_TRUE(checkpoint.step());
  EXPECT_EQ(checkpoint.column_int64(0), 0) << "the checkpoint was blocked by a reader";
}

}  // namespace
}  // namespace agentbox
