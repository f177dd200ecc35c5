#include "http/connection_table.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <vector>

namespace agentbox::http {

namespace {

std::int64_t now_ticks() {
  // Never 0, which means busy.
  return std::max<std::int64_t>(1, std::chrono::steady_clock::now().time_since_epoch().count());
}

// A connection idle for less than this is passed over while an older one is idle: a client's
// head may be on its way (just accepted), or its next request (just answered).
constexpr std::int64_t kSettleTicks =
    std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::seconds(1)).count();

}  // namespace

// ---------------------------------------------------------------- ConnectionSlot

ConnectionSlot& ConnectionSlot::operator=(ConnectionSlot&& other) noexcept {
  if (this != &other) {
    release();
    entry_ = std::move(other.entry_);
  }
  return *this;
}

ConnectionSlot::~ConnectionSlot() { release(); }

void ConnectionSlot::release() {
  if (!entry_) return;
  entry_->table->release(*entry_);
  entry_.reset();
}

void ConnectionSlot::idle() const {
  if (entry_) entry_->idle_since.store(now_ticks(), std::memory_order_relaxed);
}

void ConnectionSlot::busy() const {
  if (entry_) entry_->idle_since.store(0, std::memory_order_relaxed);
}

void ConnectionSlot::authenticated() const {
  if (entry_) entry_->authenticated.store(true, std::memory_order_relaxed);
}

void ConnectionSlot::on_evict(std::function<void()> evict) const {
  if (entry_) entry_->table->set_evict(*entry_, std::move(evict));
}

// ---------------------------------------------------------------- ConnectionTable

std::shared_ptr<ConnectionTable> ConnectionTable::create(ConnectionLimits limits) {
  return std::shared_ptr<ConnectionTable>(new ConnectionTable(limits));
}

std::string ConnectionTable::address_key(const boost::asio::ip::address& peer) {
  if (peer.is_v4()) return peer.to_v4().to_string();
  const auto v6 = peer.to_v6();
  if (v6.is_v4_mapped()) return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
  auto bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return boost::asio::ip::address_v6(bytes).to_string() + "/64";
}

template <class Lists>
detail::ConnectionEntry* ConnectionTable::oldest_idle(const Lists& lists) const {
  // In this order: settled and never authenticated, settled and authenticated, then the
  // unsettled (never authenticated first); the oldest of the first kind there is.
  const std::int64_t settled_before = now_ticks() - kSettleTicks;
  detail::ConnectionEntry* best[4] = {};
  std::int64_t best_since[4] = {};
  for (const Entries* list : lists) {
    for (detail::ConnectionEntry* e : *list) {
      const std::int64_t since = e->idle_since.load(std::memory_order_relaxed);
      if (since == 0) continue;
      const int kind = (since < settled_before ? 0 : 2) + (e->authenticated.load(std::memory_order_relaxed) ? 1 : 0);
      if (!best[kind] || since < best_since[kind]) {
        best[kind] = e;
        best_since[kind] = since;
      }
    }
  }
  for (detail::ConnectionEntry* e : best)
    if (e) return e;
  return nullptr;
}

ConnectionTable::Admission ConnectionTable::admit(const boost::asio::ip::address& peer) {
  std::string key = address_key(peer);
  auto entry = std::make_shared<detail::ConnectionEntry>();
  entry->table = shared_from_this();
  entry->idle_since.store(now_ticks(), std::memory_order_relaxed);  // its head has yet to come
  std::function<void()> evict;
  {
    std::lock_guard lock(mu_);
    detail::ConnectionEntry* victim = nullptr;
    auto here = by_address_.find(key);
    if (here != by_address_.end() && here->second.size() >= limits_.per_address) {
      victim = oldest_idle(std::array<const Entries*, 1>{&here->second});
      if (!victim) return {{}, Refusal::per_address};
    } else if (count_ >= limits_.total) {
      std::vector<const Entries*> all;
      all.reserve(by_address_.size());
      for (const auto& [address, list] : by_address_) all.push_back(&list);
      victim = oldest_idle(all);
      if (!victim) return {{}, Refusal::total};
    }
    if (victim) {
      evict = std::move(victim->evict);
      unlink(*victim);
    }
    Entries& list = by_address_[key];  // found again: unlink may have erased it
    entry->address = std::move(key);
    entry->where = list.insert(list.end(), entry.get());
    entry->counted = true;
    ++count_;
  }
  if (evict) evict();
  return {ConnectionSlot(std::move(entry)), Refusal::none};
}

void ConnectionTable::unlink(detail::ConnectionEntry& entry) {
  auto list = by_address_.find(entry.address);
  list->second.erase(entry.where);
  if (list->second.empty()) by_address_.erase(list);
  entry.counted = false;
  entry.evict = nullptr;
  --count_;
}

void ConnectionTable::release(detail::ConnectionEntry& entry) {
  std::function<void()> evict;  // destroyed outside the lock: it may hold the last of something
  std::lock_guard lock(mu_);
  evict = std::move(entry.evict);
  if (entry.counted) unlink(entry);
}

void ConnectionTable::set_evict(detail::ConnectionEntry& entry, std::function<void()> evict) {
  std::lock_guard lock(mu_);
  if (entry.counted) std::swap(entry.evict, evict);
}

std::size_t ConnectionTable::size() const {
  std::lock_guard lock(mu_);
  return count_;
}

std::size_t ConnectionTable::size_of(const boost::asio::ip::address& peer) const {
  std::lock_guard lock(mu_);
  auto it = by_address_.find(address_key(peer));
  return it == by_address_.end() ? 0 : it->second.size();
}

}  // namespace agentbox::http
