#pragma once
// FairPool: a fixed set of worker threads shared fairly between keys (for the daemon: accounts).
// Each key has its own FIFO queue and may have at most `per_key_limit` jobs running at once. An
// idle worker starts the next job of one of the keys under their cap: the key with the fewest
// jobs running, then the one that started a job longest ago (round robin between busy keys).
// So a key with 100 queued jobs delays another key's first job by at most the wait for one
// free thread, and no key can hold every thread while others wait.
//
// A job must not throw (one that does ends the process, as on a plain std::thread): callers
// that can fail catch inside the job. Jobs may post more jobs, also while the pool is being
// destroyed.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace agentbox {

class FairPool {
 public:
  using Job = std::function<void()>;

  // 0 for either counts as 1.
  FairPool(unsigned threads, unsigned per_key_limit);
  ~FairPool();  // runs every queued job, then joins the workers
  FairPool(const FairPool&) = delete;
  FairPool& operator=(const FairPool&) = delete;

  // Queues `job` behind the earlier jobs of `key`.
  void post(const std::string& key, Job job);

  unsigned threads() const { return static_cast<unsigned>(workers_.size()); }
  unsigned per_key_limit() const { return per_key_limit_; }

 private:
  struct Key {
    std::deque<Job> queued;
    unsigned running = 0;
    uint64_t last_start = 0;  // starts_ when it last started a job; 0: not since it (re)appeared
    bool in_turn = false;     // listed in turns_
  };

  void work();
  // Removes and returns the key whose job starts next.
  std::string take_turn();
  // Lists `name` for a turn if it has queued work, is under its cap and is not listed yet.
  void offer_turn(const std::string& name, Key& key);

  const unsigned per_key_limit_;
  std::mutex mu_;  // guards everything below
  std::condition_variable wake_;
  std::unordered_map<std::string, Key> keys_;  // keys with queued or running jobs only
  std::deque<std::string> turns_;              // keys that may start a job now, in turn order
  size_t queued_ = 0;                          // jobs waiting, all keys
  uint64_t starts_ = 0;                        // jobs started so far, all keys
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // last: started once the state above exists
};

}  // namespace agentbox
