#include "util/fair_pool.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace agentbox {
namespace {

// noexcept: a job that throws ends the process here, not with the pool's lock or counts broken.
void run(const FairPool::Job& job) noexcept { job(); }

}  // namespace

FairPool::FairPool(unsigned threads, unsigned per_key_limit)
    : per_key_limit_(std::max(per_key_limit, 1u)) {
  threads = std::max(threads, 1u);
  workers_.reserve(threads);
  try {
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    throw;
  }
}

FairPool::~FairPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void FairPool::post(const std::string& key, Job job) {
  std::lock_guard lock(mu_);
  Key& k = keys_[key];
  k.queued.push_back(std::move(job));
  ++queued_;
  offer_turn(key, k);
}

void FairPool::offer_turn(const std::string& name, Key& key) {
  if (key.in_turn || key.queued.empty() || key.running >= per_key_limit_) return;
  key.in_turn = true;
  turns_.push_back(name);
  wake_.notify_one();
}

std::string FairPool::take_turn() {
  // Fewest jobs running first, then the key that started one longest ago: a key with nothing
  // running goes ahead of keys that already hold a thread, so its first job waits for one free
  // thread, not for a turn of every busy key. Ties keep the listed order.
  auto rank = [&](const std::string& name) {
    const Key& k = keys_.at(name);
    return std::pair(k.running, k.last_start);
  };
  auto best = turns_.begin();
  for (auto it = std::next(best); it != turns_.end(); ++it)
    if (rank(*it) < rank(*best)) best = it;
  std::string name = std::move(*best);
  turns_.erase(best);
  return name;
}

void FairPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return !turns_.empty() || (stopping_ && queued_ == 0); });
    if (turns_.empty()) return;  // stopping, and every job has been started
    const std::string name = take_turn();
    // A key with running jobs stays in the map, so this reference outlives the unlock below.
    Key& key = keys_.at(name);
    key.in_turn = false;
    Job job = std::move(key.queued.front());
    key.queued.pop_front();
    --queued_;
    ++key.running;
    key.last_start = ++starts_;
    offer_turn(name, key);  // its next job, if it may run one more, takes a turn of its own
    if (stopping_ && queued_ == 0) wake_.notify_all();  // idle workers may leave now

    lock.unlock();
    run(job);
    job = nullptr;  // what it holds is released outside the lock too
    lock.lock();

    --key.running;
    if (key.running == 0 && key.queued.empty()) keys_.erase(name);
    else offer_turn(name, key);
  }
}

}  // namespace agentbox
