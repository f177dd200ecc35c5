#pragma once
// The accounts' home directories kept open (a ConfinedDir each, by account name), bounded: at
// most `limit` (the least recently used is closed first) and none unused for `idle` (closed at
// the next look-up: a held descriptor keeps a directory, and the filesystem under it, busy after
// its account has left). A request holds its own reference, so dropping one never closes a home
// in use; the next request opens it again.
//
// Runs on: any thread (mu_, held for memory operations only; opening a home is the caller's).
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "fs/confined_dir.hpp"
#include "util/lru_cache.hpp"

namespace agentbox::accounts {

class OpenHomes {
 public:
  using Clock = std::chrono::steady_clock;

  OpenHomes(size_t limit, std::chrono::seconds idle);

  // The open home of `name`, now used at `now`; null when it is not open (or was idle too long).
  std::shared_ptr<const ConfinedDir> find(const std::string& name, Clock::time_point now);
  // Keeps `home` for `name` and returns it, unless another request opened one meanwhile: that
  // one stays and is returned (one ConfinedDir per account).
  std::shared_ptr<const ConfinedDir> keep(const std::string& name, std::shared_ptr<const ConfinedDir> home,
                                          Clock::time_point now);
  void close(const std::string& name);

  size_t size();

 private:
  struct Home {
    std::shared_ptr<const ConfinedDir> dir;
    Clock::time_point used;
  };

  std::chrono::seconds idle_;
  std::mutex mu_;  // guards homes_
  LruCache<std::string, Home, TransparentStringHash, std::equal_to<>> homes_;
};

}  // namespace agentbox::accounts
