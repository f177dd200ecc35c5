#include "store/network_log.hpp"

#include <algorithm>
#include <chrono>

#include "util/thread_name.hpp"

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
// Refusal rows the writer remembers to merge into (most recently refused first): past it, a
// refusal repeated gets a row of its own again, no more.
constexpr size_t kOpenRows = 4096;
// Accounts whose row counts the writer remembers between purges, at most.
constexpr size_t kCountedAccounts = 10'000;
// The write-ahead log this connection lets grow before it checkpoints (pages), and the size it
// cuts the file back to after one: a flood of decisions costs the state disk about this much
// besides its rows, not SQLite's default 4 MiB.
constexpr int kWalPages = 256;
constexpr int kWalBytes = 1 << 20;

Db with_small_wal(Db db) {
  db.exec("PRAGMA wal_autocheckpoint = " + std::to_string(kWalPages) +
          "; PRAGMA journal_size_limit = " + std::to_string(kWalBytes));
  return db;
}

// What makes two refusals the same: everything but their time.
std::string merge_key(const NetworkDecision& d) {
  std::string key;
  key.reserve(d.account.size() + d.kind.size() + d.host.size() + d.address.size() + d.reason.size() + 16);
  for (const std::string* part : {&d.account, &d.kind, &d.host, &d.address, &d.reason})
    key.append(*part).push_back('\0');
  return key.append(std::to_string(d.port));
}

}  // namespace

NetworkLog::NetworkLog(Db db, std::chrono::seconds retention, size_t queue_limit, size_t rows_per_account)
    : retention_(retention),
      queue_limit_(queue_limit),
      rows_per_account_(rows_per_account),
      db_(with_small_wal(std::move(db))),
      open_rows_(kOpenRows),
      writer_([this] {
        name_this_thread("netlog-writer");
        write_loop();
      }) {}

NetworkLog::~NetworkLog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

void NetworkLog::record(NetworkDecision decision) {
  if (decision.last_ms == 0) decision.last_ms = decision.ts_ms;
  const std::string key = decision.allowed ? std::string() : merge_key(decision);
  {
    std::lock_guard lock(mu_);
    if (!decision.allowed) {
      // The same refusal still queued takes this one in: a flood holds one slot, not the queue.
      auto it = queued_refusals_.find(key);
      if (it != queued_refusals_.end() && it->second >= popped_) {
        NetworkDecision& queued = queue_[it->second - popped_];
        if (decision.ts_ms - queued.ts_ms <= kMergeWindow.count()) {
          queued.count += decision.count;
          queued.last_ms = std::max(queued.last_ms, decision.last_ms);
          return;
        }
      }
    }
    if (queue_.size() >= queue_limit_) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(decision));
    if (!key.empty()) queued_refusals_[key] = popped_ + queue_.size() - 1;
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

void NetworkLog::after_stored(std::function<void()> done) {
  {
    std::lock_guard lock(mu_);
    if (written_ < recorded_) {
      waiters_.emplace_back(recorded_, std::move(done));
      wake_.notify_one();
      return;
    }
  }
  done();
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
        std::lock_guard db_lock(db_mu_);
        rows_of_account_.clear();  // counted again at each account's next row
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
    wake_.wait_for(lock, kGather,
                   [&] { return stopping_ || flushing_ > 0 || !waiters_.empty() || queue_.size() >= kBatch; });
    while (!queue_.empty() && batch.size() < kBatch) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
      ++popped_;
    }
    queued_refusals_.clear();  // what stays queued merges no more: it only costs a slot more
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
    run_stored_waiters(lock);
  }
}

// Runs, unlocked, the after_stored() callbacks whose decisions are all stored now.
void NetworkLog::run_stored_waiters(std::unique_lock<std::mutex>& lock) {
  std::vector<std::function<void()>> ready;
  std::erase_if(waiters_, [&](auto& w) {
    if (w.first > written_) return false;
    ready.push_back(std::move(w.second));
    return true;
  });
  if (ready.empty()) return;
  lock.unlock();
  for (auto& done : ready) done();
  lock.lock();
}

void NetworkLog::store(std::vector<NetworkDecision>& batch) {
  std::lock_guard lock(db_mu_);
  try {
    Transaction tx(db_);
    std::unordered_map<std::string, int64_t> added;  // rows per account
    for (NetworkDecision& d : batch) {
      if (d.allowed) {
        insert(d);
      } else {
        std::string key = merge_key(d);
        if (merge_into_row(d, key)) continue;
        insert(d);
        if (OpenRow* row = open_rows_.find(key))
          *row = {d.id, d.ts_ms};
        else
          open_rows_.insert(std::move(key), {d.id, d.ts_ms});
      }
      ++added[d.account];
    }
    for (const auto& [account, n] : added) keep_newest_rows(account, n);
    tx.commit();
  } catch (...) {
    rows_of_account_.clear();  // the counts may hold rows rolled back; rows merged into are checked
    throw;
  }
}

void NetworkLog::insert(NetworkDecision& d) {
  auto st = db_.prepare_cached(
      "INSERT INTO network_log (ts_ms, account, kind, host, port, address, allowed, reason, bytes_up, "
      "bytes_down, count, last_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING id");
  st->bind(1, d.ts_ms).bind(2, d.account).bind(3, d.kind).bind(4, d.host).bind(5, d.port);
  st->bind(6, d.address).bind(7, int64_t{d.allowed}).bind(8, d.reason).bind(9, d.bytes_up).bind(10, d.bytes_down);
  st->bind(11, d.count).bind(12, d.last_ms);
  if (st->step()) d.id = st->column_int64(0);
}

// The row of the same refusal, first made within the merge window, takes d in, and moves to the
// top (a new id): the log lists rows by their last decision, and an account's oldest rows, the
// ones that make way, are the longest quiet. False when there is no such row, or it is gone
// (made way, or past the retention): d needs a row.
bool NetworkLog::merge_into_row(const NetworkDecision& d, const std::string& key) {
  OpenRow* row = open_rows_.find(key);
  if (!row || d.ts_ms - row->first_ms > kMergeWindow.count()) return false;
  auto st = db_.prepare_cached(
      "UPDATE network_log SET id = (SELECT max(id) FROM network_log) + 1, count = count + ?1, "
      "last_ms = max(coalesce(last_ms, ts_ms), ?2) WHERE id = ?3 RETURNING id");
  st->bind(1, d.count).bind(2, d.last_ms).bind(3, row->id);
  if (!st->step()) return false;
  row->id = st->column_int64(0);
  return true;
}

// The account's newest rows_per_account_ rows stay; older ones go. Its count is read once, then
// kept up to date here, so a write costs a delete of what it displaced, not a count.
void NetworkLog::keep_newest_rows(const std::string& account, int64_t added) {
  if (rows_per_account_ == 0) return;
  if (rows_of_account_.size() >= kCountedAccounts && !rows_of_account_.contains(account)) rows_of_account_.clear();
  auto [it, fresh] = rows_of_account_.try_emplace(account, 0);
  if (fresh) {
    auto st = db_.prepare_cached("SELECT count(*) FROM network_log WHERE account = ?1");
    st->bind(1, account);
    st->step();
    it->second = st->column_int64(0);  // this batch's rows included
  } else {
    it->second += added;
  }
  const int64_t excess = it->second - static_cast<int64_t>(rows_per_account_);
  if (excess <= 0) return;
  auto st = db_.prepare_cached(
      "DELETE FROM network_log WHERE id IN (SELECT id FROM network_log WHERE account = ?1 ORDER BY id LIMIT ?2)");
  st->bind(1, account).bind(2, excess);
  st->step();
  it->second -= db_.changes();
}

std::vector<NetworkDecision> NetworkLog::list(std::string_view account, size_t limit,
                                              std::optional<int64_t> before_id) {
  std::lock_guard lock(db_mu_);
  auto st = db_.prepare_cached(
      "SELECT id, ts_ms, account, kind, host, port, address, allowed, reason, bytes_up, bytes_down, count, "
      "coalesce(last_ms, ts_ms) FROM network_log WHERE account = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3");
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
    d.count = st->column_int64(11);
    d.last_ms = st->column_int64(12);
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
