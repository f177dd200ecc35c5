#include "store/schema.hpp"

#include <array>

namespace agentbox {
namespace {

// Step N brings the schema from version N-1 to N. Steps are append-only: never edit one that
// has shipped, add the next. Times are unix seconds.
constexpr std::array<std::string_view, 8> kMigrations = {
    // 1: accounts, processes, chat sessions, audit.
    R"sql(
CREATE TABLE accounts (
  external_id TEXT NOT NULL UNIQUE,   -- the front end's user id, any string
  name        TEXT NOT NULL UNIQUE,   -- account name shown inside the box
  uid         INTEGER NOT NULL UNIQUE,
  created     INTEGER NOT NULL,
  last_seen   INTEGER NOT NULL
) STRICT;

CREATE TABLE processes (
  id        TEXT PRIMARY KEY,
  account   TEXT NOT NULL,            -- accounts.name
  command   TEXT NOT NULL,
  status    TEXT NOT NULL CHECK (status IN ('running', 'done', 'killed', 'lost')),
  exit_code INTEGER,
  started   INTEGER NOT NULL,
  ended     INTEGER,
  log_path  TEXT NOT NULL
) STRICT;
CREATE INDEX processes_by_account ON processes (account, started);
CREATE INDEX processes_by_status ON processes (status);

CREATE TABLE chat_sessions (
  account           TEXT NOT NULL,    -- accounts.name
  chat_id           TEXT NOT NULL,
  claude_session_id TEXT NOT NULL,
  updated           INTEGER NOT NULL,
  PRIMARY KEY (account, chat_id)
) STRICT;

CREATE TABLE audit (
  id      INTEGER PRIMARY KEY,
  ts      INTEGER NOT NULL,
  account TEXT,                       -- accounts.name; NULL for daemon-wide events
  kind    TEXT NOT NULL,
  detail  TEXT NOT NULL
) STRICT;
CREATE INDEX audit_by_account ON audit (account, ts);
)sql",
    // 2: the egress proxy's decisions (store/network_log.hpp). Times in unix milliseconds.
    R"sql(
CREATE TABLE network_log (
  id         INTEGER PRIMARY KEY,
  ts_ms      INTEGER NOT NULL,
  account    TEXT NOT NULL,           -- accounts.name
  kind       TEXT NOT NULL CHECK (kind IN ('tunnel', 'forward', 'gateway')),
  host       TEXT NOT NULL,
  port       INTEGER NOT NULL,
  address    TEXT NOT NULL,           -- '' when no connection was made
  allowed    INTEGER NOT NULL CHECK (allowed IN (0, 1)),
  reason     TEXT NOT NULL,
  bytes_up   INTEGER NOT NULL,
  bytes_down INTEGER NOT NULL
) STRICT;
CREATE INDEX network_log_by_account ON network_log (account, id);
CREATE INDEX network_log_by_time ON network_log (ts_ms);
)sql",
    // 3: model tokens per account and UTC day, counted by the inference gateway
    // (store/token_usage.hpp).
    R"sql(
CREATE TABLE token_usage (
  account                     TEXT NOT NULL,   -- accounts.name
  day                         TEXT NOT NULL,   -- 'YYYY-MM-DD', UTC
  requests                    INTEGER NOT NULL,
  input_tokens                INTEGER NOT NULL,
  output_tokens               INTEGER NOT NULL,
  cache_creation_input_tokens INTEGER NOT NULL,
  cache_read_input_tokens     INTEGER NOT NULL,
  PRIMARY KEY (account, day)
) STRICT;
)sql",
    // 4: accounts deleted by the operator (DELETE /admin/accounts/{user}). Their names and uids
    // are never handed out again: a uid that owned files must not own someone else's later.
    R"sql(
CREATE TABLE deleted_accounts (
  name        TEXT PRIMARY KEY,
  external_id TEXT NOT NULL,
  uid         INTEGER NOT NULL UNIQUE,
  created     INTEGER NOT NULL,
  deleted     INTEGER NOT NULL
) STRICT;
)sql",
    // 5: accounts moved between cluster nodes (api/moves.hpp). moves_out on the source:
    // 'moving' until the target has committed, 'sent' until the account is deleted here, 'done'
    // until the target serves it, 'moved' for good (the tombstone: requests for the user answer
    // 421 naming to_node). moves_in on the target: 'receiving', 'committed' (records in),
    // 'active' (served).
    R"sql(
CREATE TABLE moves_out (
  id          TEXT PRIMARY KEY,
  external_id TEXT NOT NULL,
  name        TEXT NOT NULL,          -- the account's name here
  to_node     TEXT NOT NULL,
  to_server   TEXT NOT NULL,          -- the node's nginx server string, for the 421
  state       TEXT NOT NULL CHECK (state IN ('moving', 'sent', 'done', 'moved')),
  started     INTEGER NOT NULL,
  ended       INTEGER
) STRICT;
CREATE INDEX moves_out_by_user ON moves_out (external_id);
CREATE TABLE moves_in (
  id          TEXT PRIMARY KEY,
  external_id TEXT NOT NULL,
  name        TEXT NOT NULL,          -- the account's name here
  from_node   TEXT NOT NULL,
  state       TEXT NOT NULL CHECK (state IN ('receiving', 'committed', 'active')),
  started     INTEGER NOT NULL,
  ended       INTEGER
) STRICT;
CREATE INDEX moves_in_by_user ON moves_in (external_id);
)sql",
    // 6: the network log merges a refusal repeated within a minute into its first row
    // (store/network_log.hpp): how many were merged, and when the last was made (NULL: ts_ms).
    R"sql(
ALTER TABLE network_log ADD COLUMN count INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1);
ALTER TABLE network_log ADD COLUMN last_ms INTEGER;
)sql",
    // 7: the chat a command ran for (X-Session-Id; '' for none), so GET /execute can list one
    // chat's commands.
    R"sql(
ALTER TABLE processes ADD COLUMN chat TEXT NOT NULL DEFAULT '';
)sql",
    // 8: per-user API keys (store/api_key_store.hpp): the SHA-256 of each key, never the key.
    // A revoked key's row is deleted.
    R"sql(
CREATE TABLE api_keys (
  id      TEXT PRIMARY KEY,           -- public part of the key (abk_<id>_<secret>)
  digest  TEXT NOT NULL,              -- hex SHA-256 of the whole key
  user    TEXT NOT NULL,              -- the external user id the key acts as
  name    TEXT NOT NULL,              -- the operator's label, may be ''
  created INTEGER NOT NULL
) STRICT;
)sql",
};

}  // namespace

int latest_schema_version() { return static_cast<int>(kMigrations.size()); }

void migrate(Db& db) {
  Transaction tx(db);
  int64_t version = db.query_int64("PRAGMA user_version");
  if (version > latest_schema_version())
    throw Error("state database schema version " + std::to_string(version) +
                " is newer than this agentbox understands (" + std::to_string(latest_schema_version()) + ")");
  for (int64_t step = version; step < latest_schema_version(); ++step) {
    db.exec(kMigrations[static_cast<size_t>(step)]);
    db.exec("PRAGMA user_version = " + std::to_string(step + 1));
  }
  tx.commit();
}

Db open_state_db(const std::string& state_dir) {
  Db db = Db::open(state_dir + "/agentbox.db");
  migrate(db);
  return db;
}

}  // namespace agentbox
