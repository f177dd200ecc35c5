#include "store/network_log.hpp"

#include <chrono>

namespace agentbox {
namespace {

// Decisions stored per transaction: large enough that a flood costs few commits.
constexpr size_t kBatch = 512;
// How long the writer gathers decisions after the first one arrives before it stores them: one
// commit (and one wakeup of this thread) per this much time, not per request, while the proxy
// is busy; it costs a reader of the log at most this much delay.
constexpr auto kGather = std::chrono::milliseconds(20);
// How often decisions past the retention are forgotten.
constexpr auto kPurgeEvery = std::chrono::hours(1);

}  // namespace

NetworkLog::NetworkLog(Db db, std::chrono::seconds retention, size_t queue_limit)
    : retention_(retention), queue_limit_(queue_limit), db_(std::move(db)), writer_([this] { write_loop(); }) {}

NetworkLog::~NetworkLog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

void NetworkLog::record(NetworkDecision decision) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= queue_limit_) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(decision));
    ++recorded_;
    // Only the first decision wakes the writer, and a full batch ends its gathering: the rest
    // cost no wakeup.
    if (queue_.size() != 1 && queue_.size() != kBatch) return;
  }
  wake_.notify_one();
}

void NetworkLog::flush() {
  std::unique_lock lock(mu_);
  uint64_t target = recorded_;
  ++flushing_;
  wake_.notify_one();
  stored_.wait(lock, [&] { return written_ >= target; });
  --flushing_;
}

uint64_t NetworkLog::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void NetworkLog::write_loop() {
  std::vector<NetworkDecision> batch;
  auto next_purge = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  for (;;) {
    if (retention_.count() > 0 && std::chrono::steady_clock::now() >= next_purge) {
      lock.unlock();
      try {
        purge_before(now_unix_ms() - std::chrono::duration_cast<std::chrono::milliseconds>(retention_).count());
      } catch (const std::exception&) {
        // A broken disk: the next purge retries.
      }
      next_purge = std::chrono::steady_clock::now() + kPurgeEvery;
      lock.lock();
    }
    auto ready = [&] { return stopping_ || !queue_.empty(); };
    if (retention_.count() > 0)
      wake_.wait_until(lock, next_purge, ready);
    else
      wake_.wait(lock, ready);
    if (queue_.empty() && stopping_) return;
    if (queue_.empty()) continue;  // time to purge
    wake_.wait_for(lock, kGather, [&] { return stopping_ || flushing_ > 0 || queue_.size() >= kBatch; });
    while (!queue_.empty() && batch.size() < kBatch) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    lock.unlock();
    try {
      store(batch);
    } catch (const std::exception&) {
      // A broken disk must not stop the proxy: the decisions are lost, the next batch retries.
    }
    size_t n = batch.size();
    batch.clear();
    lock.lock();
    written_ += n;
    stored_.notify_all();
  }
}

void NetworkLog::store(std::vector<NetworkDecision>& batch) {
  std::lock_guard lock(db_mu_);
  Transaction tx(db_);
  for (const NetworkDecision& d : batch) {
    auto st = db_.prepare_cached(
        "INSERT INTO network_log (ts_ms, account, kind, host, port, address, allowed, reason, bytes_up, "
        "bytes_down) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    st->bind(1, d.ts_ms).bind(2, d.account).bind(3, d.kind).bind(4, d.host).bind(5, d.port);
    st->bind(6, d.address).bind(7, int64_t{d.allowed}).bind(8, d.reason).bind(9, d.bytes_up).bind(10, d.bytes_down);
    st->step();
  }
  tx.commit();
}

std::vector<NetworkDecision> NetworkLog::list(std::string_view account, size_t limit, std::optional<int64_t> before_id) {
  std::lock_guard lock(db_mu_);
  auto st = db_.prepare_cached(
      "SELECT id, ts_ms, account, kind, host, port, address, allowed, reason, bytes_up, bytes_down "
      "FROM network_log WHERE account = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3");
  st->bind(1, account).bind(2, before_id.value_or(INT64_MAX)).bind(3, static_cast<int64_t>(limit));
  std::vector<NetworkDecision> out;
  while (st->step()) {
    NetworkDecision d;
    d.id = st->column_int64(0);
    d.ts_ms = st->column_int64(1);
    d.account = st->column_text(2);
    d.kind = st->column_text(3);
    d.host = st->column_text(4);
    d.port = st->column_int64(5);
    d.address = st->column_text(6);
    d.allowed = st->column_int64(7) != 0;
    d.reason = st->column_text(8);
    d.bytes_up = st->column_int64(9);
    d.bytes_down = st->column_int64(10);
    out.push_back(std::move(d));
  }
  return out;
}

int NetworkLog::purge_before(int64_t cutoff_ms) {
  std::lock_guard lock(db_mu_);
  auto st = db_.prepare_cached("DELETE FROM network_log WHERE ts_ms < ?1");
  st->bind(1, cutoff_ms);
  st->step();
  return db_.changes();
}

}  // namespace agentbox
