#pragma once
// MirrorService: the daemon's mirror of homes ([backup] dir, interval, keep_deleted_days). One
// thread of its own (low CPU and I/O priority, never an HTTP or box-loop thread) runs a pass at
// start and then every interval, or at once on run_now(): each account's home is mirrored with
// mirror_tree() into DIR/NAME (backup/mirror_layout.hpp), its contexts' workspaces beside it,
// and its .deleted days older than keep_deleted_days are purged. After each pass the status is
// written (atomically) to status_file, so the last pass is still known after a restart.
//
// Runs on: its own thread ("mirror"); start(), stop(), run_now() and status() from any other.
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "backup/mirror_tree.hpp"

namespace agentbox::backup {

struct MirrorHome {
  std::string name;       // the account's name: its directory in the mirror
  std::string host_home;  // its home on the host (STATE_DIR/account.home_dir)
  // Written beside the copy as account.json (backup/mirror_record.hpp) when external_id is set.
  std::string external_id;
  uid_t uid = 0;
  int64_t created = 0;
  // Unset: the home is copied when it exists. Set: called first; what it returns is held while
  // the home is copied (the account's volume attached), and null skips the home this pass (its
  // volume detached, nothing changed since its last copy). copied() after a copy without error.
  std::function<std::shared_ptr<const void>()> pin;
  std::function<void()> copied;
  // Its contexts' workspaces on the host (VOLUME/workspaces), copied with the home into
  // DIR/NAME/workspaces under the same pin; "" or missing: none.
  std::string host_workspaces;
};

struct MirrorServiceOptions {
  std::string dir;                                 // the mirror's root; created 0700 if missing
  std::chrono::seconds interval{300};              // between the end of a pass and the next start
  int keep_deleted_days = 7;                       // days a deleted or overwritten file is kept
  std::string status_file;                         // JSON of the last pass; "" = not kept
  std::function<std::vector<MirrorHome>()> homes;  // the accounts now (called once per pass)
  // Whether the account of a mirror directory no longer among `homes` was deleted on this node
  // (its copy is then put away into .deleted); unset: every one. A node whose state was lost
  // deleted none of them: their copies wait, whole, for `backup restore --all`.
  std::function<bool(const std::string& name)> deleted_here;
  std::function<std::chrono::system_clock::time_point()> clock = [] { return std::chrono::system_clock::now(); };
  MirrorTreeOptions tree;  // test hooks
};

struct AccountPass {
  std::string name;
  MirrorStats stats;
};

struct PassReport {
  std::chrono::system_clock::time_point started, ended;
  std::vector<AccountPass> accounts;
  MirrorStats total;
};

nlohmann::json to_json(const PassReport& report);

class MirrorService {
 public:
  explicit MirrorService(MirrorServiceOptions options);
  ~MirrorService();  // stop()
  MirrorService(const MirrorService&) = delete;
  MirrorService& operator=(const MirrorService&) = delete;

  // Starts the pass thread (first pass at once). Call with the daemon's stop signals blocked:
  // the thread inherits the mask.
  void start();
  // Wakes the thread and waits for it; a pass under way stops at its next file.
  void stop();
  // Asks for a pass now (one is queued if a pass is under way); returns at once.
  void run_now();

  // One pass on the calling thread (tests; the thread uses it too). Passes never overlap.
  PassReport run_pass();

  // No pass runs while the returned lock is held (waits for the one under way): a restore
  // reads the mirror and fills homes that a pass must not copy back half-filled.
  std::unique_lock<std::mutex> hold_passes() { return std::unique_lock(pass_mu_); }

  // {"enabled", "dir", "interval", "keep_deleted_days", "running", "passes", "last_pass"}:
  // GET /admin/backup.
  nlohmann::json status() const;

  const MirrorServiceOptions& options() const { return options_; }

 private:
  void thread_main();
  void write_status_file(const nlohmann::json& last_pass) const;
  void mirror_workspaces(const std::string& host, int account_dir, const std::string& today, MirrorStats& stats) const;

  MirrorServiceOptions options_;
  std::mutex pass_mu_;     // held for a whole pass
  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<bool> stop_flag_{false};  // stopping_ for the pass under way (MirrorTreeOptions::stop)
  bool requested_ = false;
  bool running_ = false;
  std::optional<std::chrono::system_clock::time_point> running_since_;
  uint64_t passes_ = 0;       // completed since start
  nlohmann::json last_pass_;  // null until one is known (from this run or the status file)
  std::thread thread_;
};

}  // namespace agentbox::backup
