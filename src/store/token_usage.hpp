#pragma once
// Model tokens used per account and UTC day, counted by the inference gateway from the answers
// it relays (net/anthropic_usage.hpp), kept across restarts, and checked against a daily budget
// before each request. The gateway adds from its event loop, so add() never waits for the
// database: the day's totals live in memory (read from the database the first time an account's
// day is asked for) and one writer thread stores what changed.
//
// A budget holds requests in flight too: reserve() takes a request's worst case from what is
// left before it is forwarded, and the answer's counts replace that reservation when it ends
// (TokenReservation::settle), in one step, so parallel requests never spend more than the
// budget between them. Reservations live in memory only: a restart forgets requests it cut.
//
// Runs on: add() and reserve() on the box loop (never wait for the database); one writer thread
// ("ledger-writer") stores; reads and flush() from any thread.
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "store/sqlite.hpp"

namespace agentbox {

struct TokenCounts {
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  uint64_t cache_creation_input_tokens = 0;
  uint64_t cache_read_input_tokens = 0;

  // What a daily budget is charged: every token the model read or wrote.
  uint64_t total() const {
    return input_tokens + output_tokens + cache_creation_input_tokens + cache_read_input_tokens;
  }
  TokenCounts& operator+=(const TokenCounts& o);
  bool operator==(const TokenCounts&) const = default;
};

struct DailyTokens {
  std::string day;        // "2026-12-01" (UTC)
  uint64_t requests = 0;  // answers relayed
  TokenCounts tokens;
};

// A row of "SELECT day, requests, input_tokens, output_tokens, cache_creation_input_tokens,
// cache_read_input_tokens FROM token_usage" (the moves of accounts read them too).
DailyTokens daily_tokens_from_row(const Statement& row);

// "YYYY-MM-DD" of a unix time, in UTC: the day a budget is counted in.
std::string utc_day(int64_t unix_seconds);
std::string utc_today();

class TokenLedger;

// Tokens held against an account's day for one request in flight. Move-only; destroyed
// without settle(), it is released and nothing is counted (the request never reached the
// model).
class TokenReservation {
 public:
  TokenReservation() = default;
  TokenReservation(TokenReservation&& other) noexcept { *this = std::move(other); }
  TokenReservation& operator=(TokenReservation&& other) noexcept;
  ~TokenReservation() { release(nullptr); }

  // What the answer used replaces the reservation, as one more request on the day it was made.
  void settle(const TokenCounts& used) { release(&used); }
  uint64_t tokens() const { return tokens_; }

 private:
  friend class TokenLedger;
  void release(const TokenCounts* used);

  TokenLedger* ledger_ = nullptr;  // null: settled, released or moved from
  std::string account_, day_;
  uint64_t tokens_ = 0;
};

class TokenLedger {
 public:
  explicit TokenLedger(Db db);  // its own connection (open_state_db); starts the writer
  ~TokenLedger();               // stores what changed, then stops the writer
  TokenLedger(const TokenLedger&) = delete;
  TokenLedger& operator=(const TokenLedger&) = delete;

  // One more answer's tokens on the account's day.
  void add(std::string_view account, std::string_view day, const TokenCounts& tokens);
  // Holds `tokens` on the account's day if what it used and what its requests in flight hold
  // leave room for them under `budget`. Either way `left` is what remained before.
  std::optional<TokenReservation> reserve(std::string_view account, std::string_view day, uint64_t tokens,
                                          uint64_t budget, uint64_t& left);
  // Tokens the account's requests in flight hold on day.
  uint64_t in_flight(std::string_view account, std::string_view day);
  // The account's totals for day (zeros when it used nothing).
  DailyTokens on(std::string_view account, std::string_view day);
  // The account's days, newest first, at most `days` of them.
  std::vector<DailyTokens> recent(std::string_view account, size_t days);
  // Returns once everything added before the call is stored.
  void flush();

 private:
  using Key = std::pair<std::string, std::string>;  // account, day
  DailyTokens& cached(const Key& key);              // loads from the database on a miss; mu_ held
  friend class TokenReservation;
  void release(const Key& key, uint64_t tokens, const TokenCounts* used);
  void write_loop();

  std::mutex mu_;  // guards everything below but db_
  std::condition_variable wake_, stored_;
  std::map<Key, DailyTokens> days_;
  std::map<Key, uint64_t> reserved_;  // held by requests in flight; no entry at 0
  std::set<Key> dirty_;
  uint64_t changes_ = 0, stored_changes_ = 0;
  bool stopping_ = false;

  std::mutex db_mu_;  // guards db_
  Db db_;
  std::thread writer_;  // last: starts after the rest is built
};

}  // namespace agentbox
