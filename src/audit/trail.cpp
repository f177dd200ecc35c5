#include "audit/trail.hpp"

#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "util/log.hpp"
#include "util/thread_name.hpp"

namespace agentbox::audit {

namespace {

constexpr auto kRetryAfter = std::chrono::seconds(5);  // a failed disk is tried again this often
constexpr size_t kAccountCache = 4096;                 // user ids remembered by the writer
// The writer wakes this often, or when the queue is half full: a request never pays for waking
// it (a futex call and a context switch each, which on a loaded 2-core host cost ~15%).
constexpr auto kWriteEvery = std::chrono::milliseconds(100);

struct Pending {
  EventClass c;
  Builder build;
};

class Trail {
 public:
  ~Trail() { stop(); }  // a process that exits without stop() still writes what it queued

  void start(TrailOptions options) {
    std::lock_guard lock(mu_);
    if (thread_.joinable() || options.level == Level::none) return;
    options_ = std::move(options);
    file_.emplace(options_.file);
    stopping_ = false;
    level_.store(options_.level, std::memory_order_release);
    thread_ = std::thread([this] { run(); });
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      if (!thread_.joinable()) return;
      stopping_ = true;
      level_.store(Level::none, std::memory_order_release);
    }
    cv_.notify_one();
    thread_.join();
    stats_.writing = false;
  }

  void record(EventClass c, Builder build) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ || !thread_.joinable()) return;
      if (queue_.size() >= options_.queue_limit) {
        drop(DropReason::queue_full);
        return;
      }
      queue_.push_back({c, std::move(build)});
      if (queue_.size() != options_.queue_limit / 2) return;
    }
    cv_.notify_one();
  }

  Level level() const { return level_.load(std::memory_order_acquire); }
  TrailStats& stats() { return stats_; }

 private:
  void drop(DropReason why) { stats_.dropped[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed); }

  void run() {
    name_this_thread("audit");
    try_open();
    std::deque<Pending> batch;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, kWriteEvery, [this] { return stopping_ || queue_.size() >= options_.queue_limit / 2; });
        if (queue_.empty() && stopping_) return;
        batch.swap(queue_);
      }
      for (Pending& p : batch) write(p);
      batch.clear();
    }
  }

  void try_open() {
    last_try_ = std::chrono::steady_clock::now();
    if (int err = file_->open()) {
      log::error("audit", "{}: {} (the audit trail stops; the API goes on)", options_.file.path, std::strerror(err));
      stats_.writing = false;
      return;
    }
    stats_.writing = true;
  }

  void write(Pending& p) {
    if (!stats_.writing && std::chrono::steady_clock::now() - last_try_ < kRetryAfter) {
      drop(DropReason::write_error);
      return;
    }
    std::string line;
    try {
      nlohmann::json event = p.build();
      if (p.c == EventClass::api_activity) add_account(event);
      stamp(event, options_.product_version);
      line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (const std::exception& e) {
      log::error("audit", "an event could not be built: {}", e.what());
      drop(DropReason::write_error);
      return;
    }
    scrub(line);
    line += '\n';
    last_try_ = std::chrono::steady_clock::now();
    if (int err = file_->append(line)) {
      if (stats_.writing.exchange(false))
        log::error("audit", "{}: {} (the audit trail stops, and is tried again every {} s; the API goes on)",
                   options_.file.path, std::strerror(err), kRetryAfter.count());
      drop(DropReason::write_error);
      return;
    }
    if (!stats_.writing.exchange(true)) log::info("audit", "{}: writing again", options_.file.path);
    stats_.events[static_cast<size_t>(p.c)].fetch_add(1, std::memory_order_relaxed);
    if (options_.to_stdout) {  // best effort: a shipper that stalls loses lines, the file keeps them
      [[maybe_unused]] ssize_t n = ::write(STDOUT_FILENO, line.data(), line.size());
    }
  }

  // actor.user.account of an API call, from the user id, asked here rather than on the request path.
  void add_account(nlohmann::json& event) {
    if (!options_.account_of) return;
    nlohmann::json& user = event["actor"]["user"];
    if (!user.contains("uid") || user.contains("name")) return;
    const std::string uid = user["uid"].get<std::string>();
    auto it = accounts_.find(uid);
    if (it == accounts_.end()) {
      if (accounts_.size() >= kAccountCache) accounts_.clear();
      std::string name;
      try {
        name = options_.account_of(uid);
      } catch (const std::exception&) {
      }
      if (name.empty()) return;  // not known yet: asked again next time
      it = accounts_.emplace(uid, std::move(name)).first;
    }
    user["name"] = it->second;
    user["account"] = {{"name", it->second}, {"type_id", 99}, {"type", "agentbox account"}};
    event["unmapped"]["account"] = it->second;
  }

  void scrub(std::string& line) const {
    for (const std::string& secret : options_.scrub) {
      if (secret.size() < 8) continue;  // too short to be a key; replacing it would mangle the line
      for (size_t at = line.find(secret); at != std::string::npos; at = line.find(secret, at))
        line.replace(at, secret.size(), kScrubbed);
    }
  }
  static constexpr std::string_view kScrubbed = "[REDACTED]";

  std::mutex mu_;  // guards queue_, stopping_, thread_ (start/stop), options_ while starting
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::thread thread_;
  std::atomic<Level> level_{Level::none};
  TrailStats stats_;
  // The writer thread's own:
  TrailOptions options_;
  std::optional<AuditFile> file_;
  std::chrono::steady_clock::time_point last_try_{};
  std::unordered_map<std::string, std::string> accounts_;
};

Trail& trail() {
  static Trail the_trail;
  return the_trail;
}

}  // namespace

void start(TrailOptions options) { trail().start(std::move(options)); }
void stop() { trail().stop(); }
Level level() { return trail().level(); }
TrailStats& stats() { return trail().stats(); }
void record(EventClass c, Builder build) { trail().record(c, std::move(build)); }

void api_call(ApiCall call) {
  if (!on()) return;
  record(EventClass::api_activity, [c = std::move(call)] { return api_activity(c); });
}

void auth_refused(AuthRefusal refusal) {
  if (!on()) return;
  record(EventClass::authentication, [r = std::move(refusal)] { return authentication(r); });
}

void net_decision(NetDecision decision) {
  if (!on()) return;
  const EventClass c = decision.gateway ? EventClass::http_activity : EventClass::network_activity;
  record(c, [d = std::move(decision)] { return network_activity(d); });
}

void process(ProcessEvent event) {
  if (!on()) return;
  record(EventClass::process, [p = std::move(event)] { return process_activity(p); });
}

void account(AccountActivity activity, std::string_view name, std::string_view user) {
  if (!on()) return;
  record(EventClass::account,
         [e = AccountEvent{now_ms(), activity, std::string(name), std::string(user)}] { return account_change(e); });
}

}  // namespace agentbox::audit
