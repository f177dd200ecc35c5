#pragma once
// FairPool: a fixed set of worker threads shared fairly between keys (for the daemon: accounts).
// Each key has its own FIFO queue and may have at most `per_key_limit` jobs running at once. An
// idle worker starts the next job of one of the keys under their cap: the key with the fewest
// jobs running, then the one that started a job longest ago (round robin between busy keys).
// So a key with 100 queued jobs delays another key's first job by at most the wait for one
// free thread, and no key can hold every thread while others wait.
//
// The daemon's one pool type: the box launchers, the file routes' work (the HTTP library's
// offload(), http/offload.hpp) and the name lookups each have one, keyed by account.
//
// A job must not throw (one that does ends the process, as on a plain std::thread): callers
// that can fail catch inside the job. Jobs may post more jobs, also while the pool is stopping.
//
// Runs on: its own threads, named as constructed (ps -L); post() from any thread.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace agentbox {

class FairPool {
 public:
  using Job = std::function<void()>;

  // 0 for either counts as 1. The threads are named `name` (15 characters are kept).
  FairPool(unsigned threads, unsigned per_key_limit, std::string name = "pool");
  // stop().
  ~FairPool();
  FairPool(const FairPool&) = delete;
  FairPool& operator=(const FairPool&) = delete;

  // Queues `job` behind the earlier jobs of `key`. After stop() has joined the workers, a job
  // posted is never run (it is destroyed with the pool).
  void post(const std::string& key, Job job);

  // Runs every queued job (and what they post meanwhile), then joins the workers. Idempotent.
  // Safe from one of its own jobs too (a job whose captures held the last owner of the pool):
  // that worker is let go instead of joined, and the pool's state lives until it has finished.
  void stop();

  unsigned threads() const;
  unsigned per_key_limit() const;
  // Jobs waiting for a thread now, all keys (/metrics: agentbox_pool_queued_jobs).
  size_t queued() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the workers
};

}  // namespace agentbox
