#pragma once
// Every egress decision, per account: time, destination, verdict, reason and bytes moved
// (DESIGN §4). The proxy records from its event loop, so record() only queues; one writer
// thread stores the queue in batches, one transaction each, gathered for a few milliseconds
// (a busy proxy costs a commit per batch, not per request). The queue is bounded: a flood of
// decisions costs the daemon bounded memory, and what could not be kept is counted. Decisions
// older than the retention are forgotten by the same thread, at start and then hourly.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "store/sqlite.hpp"

namespace agentbox {

struct NetworkDecision {
  int64_t id = 0;             // assigned when stored; increases with time
  int64_t ts_ms = 0;          // unix milliseconds, when the decision was made
  std::string account;        // Account::name
  std::string kind;           // "tunnel" (CONNECT), "forward" (http://), "gateway"
  std::string host;           // as the box asked for it, normalized
  int64_t port = 0;
  std::string address;        // the address connected to; empty when none was
  bool allowed = false;
  std::string reason;         // the one-line reason given to the box, or the rule that allowed it
  int64_t bytes_up = 0;       // box → destination
  int64_t bytes_down = 0;     // destination → box
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

  // Takes its own connection (open_state_db) and starts the writer. retention 0: keep all.
  explicit NetworkLog(Db db, std::chrono::seconds retention = std::chrono::seconds(0),
                      size_t queue_limit = kDefaultQueueLimit);
  ~NetworkLog();  // stores what is queued, then stops the writer
  NetworkLog(const NetworkLog&) = delete;
  NetworkLog& operator=(const NetworkLog&) = delete;

  // Queues a decision; never waits for the database. Drops it (counted) when the queue is full.
  void record(NetworkDecision decision);
  // Returns once everything recorded before the call is stored.
  void flush();

  // The account's decisions, newest first: at most limit, older than before_id when given.
  std::vector<NetworkDecision> list(std::string_view account, size_t limit, std::optional<int64_t> before_id = {});
  // Forgets decisions made before cutoff_ms; returns how many.
  int purge_before(int64_t cutoff_ms);
  uint64_t dropped() const;

 private:
  void write_loop();
  void store(std::vector<NetworkDecision>& batch);

  const std::chrono::seconds retention_;
  const size_t queue_limit_;
  mutable std::mutex mu_;  // guards everything below but db_
  std::condition_variable wake_, stored_;
  std::deque<NetworkDecision> queue_;
  uint64_t recorded_ = 0, written_ = 0, dropped_ = 0;
  int flushing_ = 0;  // callers of flush() waiting: the writer stores without gathering
  bool stopping_ = false;

  std::mutex db_mu_;  // guards db_ (the writer and readers)
  Db db_;
  std::thread writer_;  // last: starts after the rest is built
};

}  // namespace agentbox
