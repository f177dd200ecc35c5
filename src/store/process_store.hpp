#pragma once
// Process records: what ran, for whom, how it ended and where its output log is, so a finished
// process stays queryable across daemon restarts. Every read is scoped to one account.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/sqlite.hpp"

namespace agentbox {

enum class ProcessStatus { running, done, killed, lost };

std::string_view to_string(ProcessStatus status);
// Throws Error for a name that is not a status.
ProcessStatus process_status_from_string(std::string_view name);

struct ProcessRecord {
  std::string id;
  std::string account;  // Account::name
  std::string command;
  ProcessStatus status = ProcessStatus::running;
  std::optional<int64_t> exit_code;  // set once it exited
  int64_t started = 0;               // unix seconds
  std::optional<int64_t> ended;      // unix seconds
  std::string log_path;              // output log file
  std::string chat;                  // the chat it ran for (X-Session-Id), "" for none
};

// A row of "SELECT id, account, command, status, exit_code, started, ended, log_path, chat FROM
// processes" (the moves of accounts read them too: store/move_store.hpp).
ProcessRecord process_record_from_row(const Statement& row);

class ProcessStore {
 public:
  // Takes its own connection (open_state_db). Safe to use from several threads.
  explicit ProcessStore(Db db);

  // Throws DbError (SQLITE_CONSTRAINT_PRIMARYKEY) for an id already stored.
  void insert(const ProcessRecord& record);
  // Records the end (or a new status) of process id; false if there is no such process.
  bool update(std::string_view id, ProcessStatus status, std::optional<int64_t> exit_code,
              std::optional<int64_t> ended);

  // Only when the process belongs to account.
  std::optional<ProcessRecord> get(std::string_view account, std::string_view id);
  std::vector<ProcessRecord> list_by_account(std::string_view account);  // oldest first

  // After a daemon restart nothing from before is running any more: every "running" record
  // becomes "lost" with ended = now. Returns how many.
  int mark_running_as_lost(int64_t now);
  // Drops finished records that ended before cutoff (retention); returns how many.
  int purge_ended_before(int64_t cutoff);
  // The same, answering the log_path of each record dropped (so its log files can go too).
  std::vector<std::string> purge_ended_before_returning_logs(int64_t cutoff);
  // A finished record dropped to keep an account within its count: its id and log_path.
  struct Dropped {
    std::string id, log_path;
  };
  // Drops the oldest finished records of each account (its boxes' together: the key before
  // '~') beyond the newest `keep` (by end, then start, then insertion): their logs are charged to the account's quota,
  // inodes included, and a user running thousands of commands an hour must not fill it with them.
  std::vector<Dropped> purge_finished_beyond(size_t keep);

 private:
  std::mutex mu_;  // guards db_
  Db db_;
};

}  // namespace agentbox
