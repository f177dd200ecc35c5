#include "store/token_usage.hpp"

#include <time.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <utility>

#include "util/thread_name.hpp"

namespace agentbox {

TokenCounts& TokenCounts::operator+=(const TokenCounts& o) {
  input_tokens += o.input_tokens;
  output_tokens += o.output_tokens;
  cache_creation_input_tokens += o.cache_creation_input_tokens;
  cache_read_input_tokens += o.cache_read_input_tokens;
  return *this;
}

std::string utc_day(int64_t unix_seconds) {
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm {};
  ::gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

std::string utc_today() {
  return utc_day(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

DailyTokens daily_tokens_from_row(const Statement& st) {
  DailyTokens d;
  d.day = st.column_text(0);
  d.requests = static_cast<uint64_t>(st.column_int64(1));
  d.tokens.input_tokens = static_cast<uint64_t>(st.column_int64(2));
  d.tokens.output_tokens = static_cast<uint64_t>(st.column_int64(3));
  d.tokens.cache_creation_input_tokens = static_cast<uint64_t>(st.column_int64(4));
  d.tokens.cache_read_input_tokens = static_cast<uint64_t>(st.column_int64(5));
  return d;
}

namespace {

constexpr const char* kColumns =
    "day, requests, input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens";

}  // namespace

TokenLedger::TokenLedger(Db db)
    : db_(std::move(db)), writer_([this] {
        name_this_thread("ledger-writer");
        write_loop();
      }) {}

TokenLedger::~TokenLedger() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

DailyTokens& TokenLedger::cached(const Key& key) {
  auto it = days_.find(key);
  if (it != days_.end()) return it->second;
  DailyTokens found;
  found.day = key.second;
  {
    std::lock_guard db_lock(db_mu_);
    auto st = db_.prepare_cached(fmt::format("SELECT {} FROM token_usage WHERE account = ?1 AND day = ?2", kColumns));
    st->bind(1, key.first).bind(2, key.second);
    if (st->step()) found = daily_tokens_from_row(*st);
  }
  // Days other than this one that are stored already are not needed in memory any more.
  std::erase_if(days_,
                [&](const auto& entry) { return entry.first.second != key.second && !dirty_.contains(entry.first); });
  return days_.emplace(key, std::move(found)).first->second;
}

void TokenLedger::add(std::string_view account, std::string_view day, const TokenCounts& tokens) {
  {
    std::lock_guard lock(mu_);
    Key key{std::string(account), std::string(day)};
    DailyTokens& d = cached(key);
    d.requests += 1;
    d.tokens += tokens;
    dirty_.insert(std::move(key));
    ++changes_;
  }
  wake_.notify_one();
}

std::optional<TokenReservation> TokenLedger::reserve(std::string_view account, std::string_view day, uint64_t tokens,
                                                     uint64_t budget, uint64_t& left) {
  std::lock_guard lock(mu_);
  Key key{std::string(account), std::string(day)};
  uint64_t held = 0;
  if (auto it = reserved_.find(key); it != reserved_.end()) held = it->second;
  uint64_t used = cached(key).tokens.total();
  left = used + held >= budget ? 0 : budget - used - held;
  if (tokens > left) return std::nullopt;
  reserved_[key] = held + tokens;
  TokenReservation r;
  r.ledger_ = this;
  r.account_ = std::move(key.first);
  r.day_ = std::move(key.second);
  r.tokens_ = tokens;
  return r;
}

uint64_t TokenLedger::in_flight(std::string_view account, std::string_view day) {
  std::lock_guard lock(mu_);
  auto it = reserved_.find({std::string(account), std::string(day)});
  return it == reserved_.end() ? 0 : it->second;
}

void TokenLedger::release(const Key& key, uint64_t tokens, const TokenCounts* used) {
  {
    std::lock_guard lock(mu_);
    if (auto it = reserved_.find(key); it != reserved_.end()) {
      it->second -= std::min(it->second, tokens);
      if (it->second == 0) reserved_.erase(it);
    }
    if (!used) return;
    DailyTokens& d = cached(key);
    d.requests += 1;
    d.tokens += *used;
    dirty_.insert(key);
    ++changes_;
  }
  wake_.notify_one();
}

TokenReservation& TokenReservation::operator=(TokenReservation&& other) noexcept {
  if (this != &other) {
    release(nullptr);
    ledger_ = std::exchange(other.ledger_, nullptr);
    account_ = std::move(other.account_);
    day_ = std::move(other.day_);
    tokens_ = std::exchange(other.tokens_, 0);
  }
  return *this;
}

void TokenReservation::release(const TokenCounts* used) {
  if (!ledger_) return;
  TokenLedger* ledger = std::exchange(ledger_, nullptr);
  ledger->release({account_, day_}, tokens_, used);
}

DailyTokens TokenLedger::on(std::string_view account, std::string_view day) {
  std::lock_guard lock(mu_);
  return cached({std::string(account), std::string(day)});
}

std::vector<DailyTokens> TokenLedger::recent(std::string_view account, size_t days) {
  flush();
  std::lock_guard db_lock(db_mu_);
  auto st = db_.prepare_cached(
      fmt::format("SELECT {} FROM token_usage WHERE account = ?1 ORDER BY day DESC LIMIT ?2", kColumns));
  st->bind(1, account).bind(2, static_cast<int64_t>(days));
  std::vector<DailyTokens> out;
  while (st->step()) out.push_back(daily_tokens_from_row(*st));
  return out;
}

void TokenLedger::flush() {
  std::unique_lock lock(mu_);
  uint64_t target = changes_;
  stored_.wait(lock, [&] { return stored_changes_ >= target; });
}

void TokenLedger::write_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !dirty_.empty(); });
    if (dirty_.empty() && stopping_) return;
    // The rows as they are now: totals, so a later write of the same row simply replaces it.
    std::vector<std::pair<Key, DailyTokens>> rows;
    for (const Key& key : dirty_) rows.emplace_back(key, days_.at(key));
    dirty_.clear();
    uint64_t covered = changes_;
    lock.unlock();
    try {
      std::lock_guard db_lock(db_mu_);
      Transaction tx(db_);
      for (const auto& [key, d] : rows) {
        auto st = db_.prepare_cached(
            fmt::format("INSERT INTO token_usage (account, {}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                        "ON CONFLICT (account, day) DO UPDATE SET requests = ?3, input_tokens = ?4, "
                        "output_tokens = ?5, cache_creation_input_tokens = ?6, cache_read_input_tokens = ?7",
                        kColumns));
        st->bind(1, key.first).bind(2, key.second).bind(3, static_cast<int64_t>(d.requests));
        st->bind(4, static_cast<int64_t>(d.tokens.input_tokens)).bind(5, static_cast<int64_t>(d.tokens.output_tokens));
        st->bind(6, static_cast<int64_t>(d.tokens.cache_creation_input_tokens));
        st->bind(7, static_cast<int64_t>(d.tokens.cache_read_input_tokens));
        st->step();
      }
      tx.commit();
    } catch (const std::exception&) {
      // A broken disk must not stop the gateway: the totals stay in memory and budgets hold
      // until a restart.
    }
    lock.lock();
    stored_changes_ = std::max(stored_changes_, covered);
    stored_.notify_all();
  }
}

}  // namespace agentbox
