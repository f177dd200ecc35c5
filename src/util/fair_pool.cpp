#include "util/fair_pool.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include "util/thread_name.hpp"

namespace agentbox {
namespace {

// noexcept: a job that throws ends the process here, not with the pool's lock or counts broken.
void run(const FairPool::Job& job) noexcept { job(); }

}  // namespace

struct FairPool::State {
  struct Key {
    std::deque<Job> queued;
    unsigned running = 0;
    uint64_t last_start = 0;  // starts when it last started a job; 0: not since it (re)appeared
    bool in_turn = false;     // listed in turns
  };

  explicit State(unsigned limit) : per_key_limit(limit) {}

  void work();
  // Removes and returns the key whose job starts next.
  std::string take_turn();
  // Lists `name` for a turn if it has queued work, is under its cap and is not listed yet.
  void offer_turn(const std::string& name, Key& key);

  const unsigned per_key_limit;
  std::mutex mu;  // guards everything below
  std::condition_variable wake;
  std::unordered_map<std::string, Key> keys;  // keys with queued or running jobs only
  std::deque<std::string> turns;              // keys that may start a job now, in turn order
  size_t queued = 0;                          // jobs waiting, all keys
  uint64_t starts = 0;                        // jobs started so far, all keys
  bool stopping = false;
  std::vector<std::thread> workers;  // until stop() takes them
  unsigned thread_count = 0;         // how many workers were started
};

FairPool::FairPool(unsigned threads, unsigned per_key_limit, std::string name)
    : state_(std::make_shared<State>(std::max(per_key_limit, 1u))) {
  threads = std::max(threads, 1u);
  state_->workers.reserve(threads);
  try {
    for (unsigned i = 0; i < threads; ++i)
      state_->workers.emplace_back([state = state_, name] {
        name_this_thread(name);
        state->work();
      });
    state_->thread_count = threads;
  } catch (...) {
    {
      std::lock_guard lock(state_->mu);
      state_->stopping = true;
    }
    state_->wake.notify_all();
    for (auto& w : state_->workers) w.join();
    throw;
  }
}

FairPool::~FairPool() { stop(); }

void FairPool::stop() {
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
    workers.swap(state_->workers);
  }
  state_->wake.notify_all();
  for (auto& w : workers) {
    if (w.get_id() == std::this_thread::get_id()) {
      w.detach();  // we are its job: it finishes the queue with the others, then leaves
    } else {
      w.join();
    }
  }
}

unsigned FairPool::threads() const { return state_->thread_count; }

unsigned FairPool::per_key_limit() const { return state_->per_key_limit; }

size_t FairPool::queued() const {
  std::lock_guard lock(state_->mu);
  return state_->queued;
}

void FairPool::post(const std::string& key, Job job) {
  std::lock_guard lock(state_->mu);
  State::Key& k = state_->keys[key];
  k.queued.push_back(std::move(job));
  ++state_->queued;
  state_->offer_turn(key, k);
}

void FairPool::State::offer_turn(const std::string& name, Key& key) {
  if (key.in_turn || key.queued.empty() || key.running >= per_key_limit) return;
  key.in_turn = true;
  turns.push_back(name);
  wake.notify_one();
}

std::string FairPool::State::take_turn() {
  // Fewest jobs running first, then the key that started one longest ago: a key with nothing
  // running goes ahead of keys that already hold a thread, so its first job waits for one free
  // thread, not for a turn of every busy key. Ties keep the listed order.
  auto rank = [&](const std::string& name) {
    const Key& k = keys.at(name);
    return std::pair(k.running, k.last_start);
  };
  auto best = turns.begin();
  for (auto it = std::next(best); it != turns.end(); ++it)
    if (rank(*it) < rank(*best)) best = it;
  std::string name = std::move(*best);
  turns.erase(best);
  return name;
}

void FairPool::State::work() {
  std::unique_lock lock(mu);
  for (;;) {
    wake.wait(lock, [&] { return !turns.empty() || (stopping && queued == 0); });
    if (turns.empty()) return;  // stopping, and every job has been started
    const std::string name = take_turn();
    // A key with running jobs stays in the map, so this reference outlives the unlock below.
    Key& key = keys.at(name);
    key.in_turn = false;
    Job job = std::move(key.queued.front());
    key.queued.pop_front();
    --queued;
    ++key.running;
    key.last_start = ++starts;
    offer_turn(name, key);                           // its next job, if it may run one more, takes a turn of its own
    if (stopping && queued == 0) wake.notify_all();  // idle workers may leave now

    lock.unlock();
    run(job);
    job = nullptr;  // what it holds is released outside the lock too (perhaps the pool itself)
    lock.lock();

    --key.running;
    if (key.running == 0 && key.queued.empty())
      keys.erase(name);
    else
      offer_turn(name, key);
  }
}

}  // namespace agentbox
