#include "store/process_store.hpp"

#include <array>

namespace agentbox {
namespace {

struct StatusName {
  ProcessStatus status;
  std::string_view name;  // as stored and as the API shows it
};
constexpr std::array<StatusName, 4> kStatusNames = {{
    {ProcessStatus::running, "running"},
    {ProcessStatus::done, "done"},
    {ProcessStatus::killed, "killed"},
    {ProcessStatus::lost, "lost"},
}};

constexpr std::string_view kSelectProcess =
    "SELECT id, account, command, status, exit_code, started, ended, log_path, chat FROM processes ";

}  // namespace

ProcessRecord process_record_from_row(const Statement& row) {
  ProcessRecord r;
  r.id = row.column_text(0);
  r.account = row.column_text(1);
  r.command = row.column_text(2);
  r.status = process_status_from_string(row.column_text(3));
  r.exit_code = row.column_optional_int64(4);
  r.started = row.column_int64(5);
  r.ended = row.column_optional_int64(6);
  r.log_path = row.column_text(7);
  r.chat = row.column_text(8);
  return r;
}

std::string_view to_string(ProcessStatus status) {
  for (const StatusName& s : kStatusNames)
    if (s.status == status) return s.name;
  return "unknown";
}

ProcessStatus process_status_from_string(std::string_view name) {
  for (const StatusName& s : kStatusNames)
    if (s.name == name) return s.status;
  throw Error("unknown process status \"" + std::string(name) + "\"");
}

ProcessStore::ProcessStore(Db db) : db_(std::move(db)) {}

void ProcessStore::insert(const ProcessRecord& r) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached(
      "INSERT INTO processes (id, account, command, status, exit_code, started, ended, log_path, chat) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  st->bind(1, r.id).bind(2, r.account).bind(3, r.command).bind(4, to_string(r.status));
  st->bind(5, r.exit_code).bind(6, r.started).bind(7, r.ended).bind(8, r.log_path).bind(9, r.chat);
  st->step();
}

bool ProcessStore::update(std::string_view id, ProcessStatus status, std::optional<int64_t> exit_code,
                          std::optional<int64_t> ended) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached("UPDATE processes SET status = ?1, exit_code = ?2, ended = ?3 WHERE id = ?4");
  st->bind(1, to_string(status)).bind(2, exit_code).bind(3, ended).bind(4, id);
  st->step();
  return db_.changes() > 0;
}

std::optional<ProcessRecord> ProcessStore::get(std::string_view account, std::string_view id) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached(std::string(kSelectProcess) + "WHERE id = ?1 AND account = ?2");
  st->bind(1, id).bind(2, account);
  if (!st->step()) return std::nullopt;
  return process_record_from_row(*st);
}

std::vector<ProcessRecord> ProcessStore::list_by_account(std::string_view account) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached(std::string(kSelectProcess) + "WHERE account = ?1 ORDER BY started, rowid");
  st->bind(1, account);
  std::vector<ProcessRecord> out;
  while (st->step()) out.push_back(process_record_from_row(*st));
  return out;
}

int ProcessStore::mark_running_as_lost(int64_t now) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare("UPDATE processes SET status = 'lost', ended = ?1 WHERE status = 'running'");
  st.bind(1, now);
  st.step();
  return db_.changes();
}

int ProcessStore::purge_ended_before(int64_t cutoff) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare("DELETE FROM processes WHERE status != 'running' AND ended < ?1");
  st.bind(1, cutoff);
  st.step();
  return db_.changes();
}

std::vector<std::string> ProcessStore::purge_ended_before_returning_logs(int64_t cutoff) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare("DELETE FROM processes WHERE status != 'running' AND ended < ?1 RETURNING log_path");
  st.bind(1, cutoff);
  std::vector<std::string> logs;
  while (st.step()) logs.push_back(st.column_text(0));
  return logs;
}

std::vector<ProcessStore::Dropped> ProcessStore::purge_finished_beyond(size_t keep) {
  std::lock_guard lock(mu_);
  Statement st = db_.prepare(
      "DELETE FROM processes WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER ("
      "PARTITION BY substr(account, 1, instr(account || '~', '~') - 1) ORDER BY ended DESC, started DESC, rowid DESC) "
      "AS n "
      "FROM processes WHERE status != 'running') WHERE n > ?1) RETURNING id, log_path");
  st.bind(1, static_cast<int64_t>(keep));
  std::vector<Dropped> out;
  while (st.step()) out.push_back({st.column_text(0), st.column_text(1)});
  return out;
}

}  // namespace agentbox
