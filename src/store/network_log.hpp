#pragma once
// Every egress decision, per account: time, destination, verdict, reason and bytes moved
// (DESIGN §4). The proxy records from its event loop, so record() only queues; one writer
// thread stores the queue in batches, one transaction each, gathered for a few milliseconds
// (a busy proxy costs a commit per batch, not per request). The queue is bounded: a flood of
// decisions costs the daemon bounded memory, and what could not be kept is counted. Decisions
// older than the retention are forgotten by the same thread, at start and then hourly.
//
// The log is on the state disk every account's volume shares, outside every quota, so a box
// must not be able to grow it at will (issue 30: a box refused in a loop wrote 46 MB in 10 s):
//  * the same refusal again (account, kind, host, port, address and reason alike) within
//    kMergeWindow of the first is not a row of its own: the first row's count and last time
//    grow (in the queue already, so a flood takes one slot there, and then in the database),
//    and the row moves to the top (a new id): rows are listed by their last decision;
//  * an account keeps at most rows_per_account rows: the oldest go as new ones come.
// Allowed decisions are never merged (each carries its own bytes).
//
// Runs on: record() on the box loop (never waits); one writer thread ("netlog-writer") stores;
// list(), flush(), after_stored() and purge_before() from any thread.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "store/sqlite.hpp"
#include "util/lru_cache.hpp"

namespace agentbox {

struct NetworkDecision {
  int64_t id = 0;       // assigned when stored; increases with time
  int64_t ts_ms = 0;    // unix milliseconds, when the decision was made
  std::string account;  // Account::name
  std::string kind;     // "tunnel" (CONNECT), "forward" (http://), "gateway"
  std::string host;     // as the box asked for it, normalized
  int64_t port = 0;
  std::string address;  // the address connected to; empty when none was
  bool allowed = false;
  std::string reason;      // the one-line reason given to the box, or the rule that allowed it
  int64_t bytes_up = 0;    // box → destination
  int64_t bytes_down = 0;  // destination → box
  int64_t count = 1;       // refusals merged into this one (ts_ms the first, last_ms the last)
  int64_t last_ms = 0;     // 0 when recorded: ts_ms
};

// Now, in unix milliseconds: a decision's ts_ms. Inline: the proxy records decisions in the
// static `agentbox run` too, which links nothing of the store.
inline int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class NetworkLog {
 public:
  static constexpr size_t kDefaultQueueLimit = 100'000;
  static constexpr size_t kDefaultRowsPerAccount = 10'000;  // [egress] log_rows
  // A refusal merges into the row of the same refusal made at most this long before it.
  static constexpr std::chrono::milliseconds kMergeWindow{60'000};

  // Takes its own connection (open_state_db) and starts the writer. retention 0: keep all.
  explicit NetworkLog(Db db, std::chrono::seconds retention = std::chrono::seconds(0),
                      size_t queue_limit = kDefaultQueueLimit, size_t rows_per_account = kDefaultRowsPerAccount);
  ~NetworkLog();  // stores what is queued, then stops the writer
  NetworkLog(const NetworkLog&) = delete;
  NetworkLog& operator=(const NetworkLog&) = delete;

  // Queues a decision, or merges a refusal into the same one queued; never waits for the
  // database. Drops it (counted) when the queue is full.
  void record(NetworkDecision decision);
  // Returns once everything recorded before the call is stored.
  void flush();
  // Runs done once everything recorded before the call is stored: at once on this thread when
  // it is, else on the writer thread after the batch that stores it (which then gathers no
  // longer). What a box was just refused is in the log its next read lists, without a wait on
  // the caller's thread. done must be quick and must not throw.
  void after_stored(std::function<void()> done);

  // The account's decisions, newest first: at most limit, older than before_id when given.
  std::vector<NetworkDecision> list(std::string_view account, size_t limit, std::optional<int64_t> before_id = {});
  // Forgets decisions made before cutoff_ms; returns how many.
  int purge_before(int64_t cutoff_ms);
  uint64_t dropped() const;

 private:
  // A refused decision's row: where later ones of the same refusal merge.
  struct OpenRow {
    int64_t id = 0;
    int64_t first_ms = 0;
  };

  void write_loop();
  void run_stored_waiters(std::unique_lock<std::mutex>& lock);
  void store(std::vector<NetworkDecision>& batch);
  void insert(NetworkDecision& d);
  bool merge_into_row(const NetworkDecision& d, const std::string& key);
  void keep_newest_rows(const std::string& account, int64_t added);

  const std::chrono::seconds retention_;
  const size_t queue_limit_;
  const size_t rows_per_account_;
  mutable std::mutex mu_;  // guards everything below but db_
  std::condition_variable wake_, stored_;
  std::deque<NetworkDecision> queue_;
  // Refusals in queue_ by merge key, as sequence numbers (queue_.front() is popped_ + 0); taken
  // ones are forgotten whenever the writer takes a batch.
  std::unordered_map<std::string, uint64_t> queued_refusals_;
  uint64_t popped_ = 0;
  uint64_t recorded_ = 0, written_ = 0, dropped_ = 0;
  int flushing_ = 0;  // callers of flush() waiting: the writer stores without gathering
  // after_stored() callbacks and the count of recorded_ each waits for (never more than
  // recorded_, so the writer reaches them all).
  std::vector<std::pair<uint64_t, std::function<void()>>> waiters_;
  bool stopping_ = false;

  std::mutex db_mu_;  // guards db_ and what the writer keeps of it, below (the writer and readers)
  Db db_;
  LruCache<std::string, OpenRow> open_rows_;                  // by merge key
  std::unordered_map<std::string, int64_t> rows_of_account_;  // known counts; forgotten after a purge
  std::thread writer_;                                        // last: starts after the rest is built
};

}  // namespace agentbox
