#pragma once
// Moves of accounts between cluster nodes, as each side keeps them (api/moves.hpp):
// moves_out on the source, moves_in on the target, both keyed by the move id the source made.
// Also what a move carries besides files: the account's process records, chat sessions and
// token usage, read on the source and written on the target in the transaction that commits
// the move there. Safe from several threads.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/process_store.hpp"
#include "store/sqlite.hpp"
#include "store/token_usage.hpp"

namespace agentbox {

struct MoveOut {
  std::string id;
  std::string external_id;
  std::string name;  // the account's name on this (source) node
  std::string to_node;
  std::string to_server;  // the target's nginx server string (named in the 421)
  std::string state;      // "moving", "sent", "done", "moved" (store/schema.cpp, step 5)
  int64_t started = 0;
};

struct MoveIn {
  std::string id;
  std::string external_id;
  std::string name;  // the account's name on this (target) node
  std::string from_node;
  std::string state;  // "receiving", "committed", "active"
  int64_t started = 0;
};

struct ChatSessionRow {
  std::string chat_id;
  std::string session_id;
  int64_t updated = 0;
};

// One account's records; `account` fields are the holder's account name.
struct MovedRecords {
  std::vector<ProcessRecord> processes;
  std::vector<ChatSessionRow> chats;
  std::vector<DailyTokens> tokens;
};

class MoveStore {
 public:
  explicit MoveStore(Db db);  // its own connection (open_state_db)

  // Source side.
  // The user's move that is not over ("moved") yet, else nullopt.
  std::optional<MoveOut> open_out(std::string_view external_id);
  void insert_out(const MoveOut& move);
  void set_out_state(std::string_view id, std::string_view state, int64_t now);
  // Every move out not superseded: what the placement of moved users is decided from.
  std::vector<MoveOut> outs();
  // The account's records as they are now; running processes are reported as lost (the box
  // stopped before this is read).
  MovedRecords records_of(std::string_view account);

  // Target side.
  std::optional<MoveIn> in(std::string_view id);
  std::vector<MoveIn> pending_ins();  // not active yet
  // Records the move as receiving and drops the user's tombstone here (a user moved away and
  // now moved back), in one transaction. Throws DbError (UNIQUE) for an id already stored.
  void insert_in(const MoveIn& move);
  // Writes the records under `account` (which must not have any yet) and marks the move
  // committed, in one transaction: the move's commit point on the target.
  void commit_in(std::string_view id, std::string_view account, const MovedRecords& records);
  void set_in_state(std::string_view id, std::string_view state, int64_t now);
  // A move that could not begin here after all (the user got an account meanwhile).
  void remove_in(std::string_view id);

 private:
  std::mutex mu_;  // guards db_
  Db db_;
};

}  // namespace agentbox
