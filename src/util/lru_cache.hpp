#pragma once
// LruCache: a map that holds at most `capacity` entries and, to make room, drops the one used
// least recently. For caches in front of a source of truth (a database, the filesystem): a
// dropped entry is simply loaded again. Every operation is O(1) on average.
//
// Not thread-safe: the owner guards it (find() reorders, so even a look-up needs the lock).
// Lookups take any key type the hash and equality accept (e.g. a string_view for string keys
// with a transparent hash such as TransparentStringHash).
#include <cstddef>
#include <functional>
#include <list>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace agentbox {

// Hashes std::string, string_view and C strings alike, so a string-keyed cache is searched by
// string_view without building a std::string.
struct TransparentStringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template <class Key, class Value, class Hash = std::hash<Key>, class Equal = std::equal_to<Key>>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {
    if (capacity_ == 0) throw std::invalid_argument("LruCache capacity must be at least 1");
  }

  // The value for key, now the most recently used; nullptr when absent. The pointer is valid
  // until the entry is dropped (by insert(), erase() or evict_oldest_while()).
  template <class K>
  Value* find(const K& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);  // to the front; iterators stay valid
    return &it->second->second;
  }

  // Inserts key → value unless key is present (then the existing value stays, like
  // std::map::emplace). Either way the entry becomes the most recently used; returns its value.
  // The least recently used entry is dropped when this one makes the cache overflow.
  Value& insert(Key key, Value value) {
    if (Value* found = find(key)) return *found;
    order_.emplace_front(std::move(key), std::move(value));
    try {
      index_.emplace(order_.front().first, order_.begin());
    } catch (...) {
      order_.pop_front();
      throw;
    }
    if (order_.size() > capacity_) drop(std::prev(order_.end()));
    return order_.front().second;
  }

  // Drops key; false if it was absent.
  template <class K>
  bool erase(const K& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    drop(it->second);
    return true;
  }

  // Drops entries from the least recently used end while pred(key, value) holds, e.g. those
  // idle for too long; returns how many were dropped.
  template <class Pred>
  size_t evict_oldest_while(Pred&& pred) {
    size_t dropped = 0;
    while (!order_.empty() && pred(order_.back().first, order_.back().second)) {
      drop(std::prev(order_.end()));
      ++dropped;
    }
    return dropped;
  }

  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  using Order = std::list<std::pair<const Key, Value>>;  // most recently used first

  void drop(typename Order::iterator it) {
    index_.erase(it->first);
    order_.erase(it);
  }

  size_t capacity_;
  Order order_;
  // Each key twice (here and in order_): simpler than views into list nodes, and keys are small.
  std::unordered_map<Key, typename Order::iterator, Hash, Equal> index_;
};

}  // namespace agentbox
