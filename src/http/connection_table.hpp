#pragma once
// The API's connection places: how many connections are open, daemon-wide and from each client
// address, and which one to close when a new connection finds them taken. Every connection
// holds a ConnectionSlot from accept to close, through whatever takes it over (a terminal's
// WebSocket, a /proxy stream, an upload), so every open connection counts.
//
// A new connection whose address holds per_address places (or that finds all `total` taken)
// makes room by closing the oldest idle connection of that address (or of all): one waiting for
// its next request, one whose request head has not completed, a WebSocket that has not sent its
// auth frame. Connections that never presented the API key go first, then those that did, and
// one idle for under a second (its head, or its next request, may be on the way) only when no
// other is idle. A connection serving a request is never closed for room: with none idle, the new one is
// refused (the listener answers 429 or 503 naming the limit). So a client holding thousands of
// idle connections cannot lock others out: each new one takes the place of its oldest.
//
// Sessions mark themselves idle and busy with relaxed atomic stores (no lock per request); the
// table is locked when a connection opens or closes, and scans for the oldest idle connection
// only when a limit is reached.
#include <boost/asio/ip/address.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace agentbox::http {

struct ConnectionLimits {
  std::size_t total = 10'000;       // open connections, daemon-wide
  std::size_t per_address = 8'192;  // of them from one address (an IPv6 /64)
};

class ConnectionTable;

namespace detail {
struct ConnectionEntry;
}

// One connection's place; gives it back when destroyed. Move-only; any thread.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;  // holds no place
  ConnectionSlot(ConnectionSlot&&) noexcept = default;
  ConnectionSlot& operator=(ConnectionSlot&& other) noexcept;
  ~ConnectionSlot();

  // Waiting for a request (or a WebSocket for its auth frame): may be closed to make room.
  void idle() const;
  // Serving a request, or taken over and authenticated: never closed to make room.
  void busy() const;
  // It presented the API key (or a signed link) once: closed for room after those that never did.
  void authenticated() const;
  // What closes the connection when the table gives its place to another: called once, on the
  // thread admitting the newcomer, after the place is gone; must not block (post to the owner).
  void on_evict(std::function<void()> evict) const;

  explicit operator bool() const { return entry_ != nullptr; }

 private:
  friend class ConnectionTable;
  explicit ConnectionSlot(std::shared_ptr<detail::ConnectionEntry> entry) : entry_(std::move(entry)) {}
  void release();
  std::shared_ptr<detail::ConnectionEntry> entry_;
};

class ConnectionTable : public std::enable_shared_from_this<ConnectionTable> {
 public:
  enum class Refusal { none, total, per_address };
  struct Admission {
    ConnectionSlot slot;  // empty when refused
    Refusal refused = Refusal::none;
  };

  static std::shared_ptr<ConnectionTable> create(ConnectionLimits limits);

  // A place for a new connection from `peer`, after closing the oldest idle connection when a
  // limit is reached; refused when every connection in the way is busy.
  Admission admit(const boost::asio::ip::address& peer);

  std::size_t size() const;
  std::size_t size_of(const boost::asio::ip::address& peer) const;
  const ConnectionLimits& limits() const { return limits_; }

  // The address a per-address limit counts by: IPv4 as is (also when mapped into IPv6), IPv6 by
  // its /64, the smallest network one holder usually has ("2001:db8:1:2::/64").
  static std::string address_key(const boost::asio::ip::address& peer);

 private:
  friend class ConnectionSlot;
  using Entries = std::list<detail::ConnectionEntry*>;

  explicit ConnectionTable(ConnectionLimits limits) : limits_(limits) {}
  // Under mu_: the oldest idle entry in lists (unauthenticated before authenticated), or null.
  template <class Lists>
  detail::ConnectionEntry* oldest_idle(const Lists& lists) const;
  void unlink(detail::ConnectionEntry& entry);  // under mu_
  void release(detail::ConnectionEntry& entry);
  void set_evict(detail::ConnectionEntry& entry, std::function<void()> evict);

  const ConnectionLimits limits_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entries> by_address_;  // no empty lists
  std::size_t count_ = 0;
};

namespace detail {
// Shared by a slot and the table: the table lists it while it is counted.
struct ConnectionEntry {
  std::shared_ptr<ConnectionTable> table;
  std::string address;  // ConnectionTable::address_key
  // Written by the connection's owner, read by a scan of the table: relaxed is enough, a scan
  // that reads a stale value picks a victim one request late.
  std::atomic<std::int64_t> idle_since{0};  // steady_clock ticks; 0 = busy
  std::atomic<bool> authenticated{false};
  // Under the table's lock.
  bool counted = false;
  std::list<ConnectionEntry*>::iterator where;
  std::function<void()> evict;
};
}  // namespace detail

}  // namespace agentbox::http
