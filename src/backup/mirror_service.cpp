#include "backup/mirror_service.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "backup/mirror_layout.hpp"
#include "backup/mirror_record.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/log.hpp"
#include "util/thread_name.hpp"
#include "util/thread_priority.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::backup {
namespace {

using Clock = std::chrono::system_clock;

double unix_seconds(Clock::time_point t) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count()) /
         1000.0;
}

nlohmann::json stats_json(const MirrorStats& s) {
  return {{"files_copied", s.files_copied}, {"bytes_copied", s.bytes_copied}, {"unchanged", s.unchanged},
          {"kept_deleted", s.kept_deleted}, {"changing", s.changing},         {"errors", s.errors}};
}

}  // namespace

// The account's contexts' workspaces into account_dir/workspaces, kept as the home's are.
void MirrorService::mirror_workspaces(const std::string& host, int account_dir, const std::string& today,
                                      MirrorStats& stats) const {
  UniqueFd src(::open(host.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!src && errno == ENOENT) return;  // no context has had a workspace yet
  if (!src) return stats.error(fmt::format("{}: {}", host, std::strerror(errno)));
  MirrorTreeOptions tree = options_.tree;
  tree.copy = kWorkspacesDir;
  tree.kept_under = kKeptWorkspaces;
  stats.add(mirror_tree(src.get(), account_dir, today, tree));
}

nlohmann::json to_json(const PassReport& r) {
  nlohmann::json j = stats_json(r.total);
  j["started"] = unix_seconds(r.started);
  j["ended"] = unix_seconds(r.ended);
  j["accounts"] = nlohmann::json::array();
  for (const AccountPass& a : r.accounts) {
    nlohmann::json aj = stats_json(a.stats);
    aj["name"] = a.name;
    aj["error_messages"] = a.stats.error_messages;
    j["accounts"].push_back(std::move(aj));
  }
  return j;
}

MirrorService::MirrorService(MirrorServiceOptions options) : options_(std::move(options)) {
  options_.tree.stop = &stop_flag_;
  if (options_.dir.empty()) throw Error("backup: no mirror directory");
  if (::mkdir(options_.dir.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + options_.dir + ")");
  if (!options_.status_file.empty()) {
    // The last pass of a previous run; a damaged file only means it is not known.
    if (auto text = read_file_if_exists(options_.status_file)) {
      nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_object() && j.contains("last_pass")) last_pass_ = j["last_pass"];
    }
  }
}

MirrorService::~MirrorService() { stop(); }

void MirrorService::start() {
  thread_ = std::thread([this] {
    name_this_thread("mirror");
    thread_main();
  });
}

void MirrorService::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_flag_ = true;
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MirrorService::run_now() {
  {
    std::lock_guard lock(mu_);
    requested_ = true;
  }
  wake_.notify_all();
}

void MirrorService::thread_main() {
  lower_thread_priority();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    requested_ = false;
    lock.unlock();
    try {
      run_pass();
    } catch (const std::exception& e) {
      log::warn("backup", "backup: pass failed: {}", e.what());
    }
    lock.lock();
    wake_.wait_for(lock, options_.interval, [this] { return stopping_ || requested_; });
  }
}

PassReport MirrorService::run_pass() {
  std::lock_guard pass(pass_mu_);
  PassReport report;
  report.started = options_.clock();
  {
    std::lock_guard lock(mu_);
    running_ = true;
    running_since_ = report.started;
  }
  const std::string today = utc_date(report.started);
  UniqueFd root(::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::vector<MirrorHome> homes;
  if (!root) {
    report.total.error(fmt::format("{}: {}", options_.dir, std::strerror(errno)));
  } else {
    homes = options_.homes ? options_.homes() : std::vector<MirrorHome>{};
  }
  for (const MirrorHome& home : homes) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
    AccountPass account{home.name, {}};
    try {
      std::shared_ptr<const void> pinned;
      if (home.pin && !(pinned = home.pin())) continue;
      UniqueFd src(::open(home.host_home.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!src && errno == ENOENT) continue;  // never used: no home yet
      if (!src) throw sys_error("open(" + home.host_home + ")");
      if (::mkdirat(root.get(), home.name.c_str(), 0700) != 0 && errno != EEXIST)
        throw sys_error("mkdir(" + home.name + ")");
      UniqueFd dst(::openat(root.get(), home.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!dst) throw sys_error("open(" + home.name + ")");
      account.stats = mirror_tree(src.get(), dst.get(), today, options_.tree);
      if (!home.host_workspaces.empty()) mirror_workspaces(home.host_workspaces, dst.get(), today, account.stats);
      if (!home.external_id.empty()) write_record(dst.get(), {home.external_id, home.name, home.uid, home.created});
      purge_deleted(dst.get(), today, options_.keep_deleted_days, account.stats);
      if (home.copied && account.stats.errors == 0) home.copied();
    } catch (const std::exception& e) {
      account.stats.error(e.what());
    }
    report.total.add(account.stats);
    report.accounts.push_back(std::move(account));
  }
  bool stopped = false;
  {
    std::lock_guard lock(mu_);
    stopped = stopping_;
  }
  // Only after a complete look at the accounts: a pass cut short judges no account gone.
  if (root && !stopped) {
    std::set<std::string> live;
    for (const MirrorHome& home : homes) live.insert(home.name);
    put_away_gone_accounts(root.get(), live, today, options_.keep_deleted_days, report.total, options_.deleted_here);
  }
  report.ended = options_.clock();
  nlohmann::json last = to_json(report);
  {
    std::lock_guard lock(mu_);
    running_ = false;
    running_since_.reset();
    ++passes_;
    last_pass_ = last;
  }
  try {
    write_status_file(last);
  } catch (const std::exception& e) {
    log::warn("backup", "backup: status file {}: {}", options_.status_file, e.what());
  }
  if (report.total.errors > 0)
    log::warn("backup", "backup: pass ended with {} errors, the first: {}", report.total.errors,
              report.total.error_messages.empty() ? "" : report.total.error_messages.front());
  return report;
}

void MirrorService::write_status_file(const nlohmann::json& last_pass) const {
  if (options_.status_file.empty()) return;
  const std::string tmp = options_.status_file + ".tmp";
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) throw sys_error("open(" + tmp + ")");
    write_all(fd.get(), nlohmann::json{{"last_pass", last_pass}}.dump() + "\n");
  }
  check(::rename(tmp.c_str(), options_.status_file.c_str()), "rename(" + tmp + ")");
}

nlohmann::json MirrorService::status() const {
  std::lock_guard lock(mu_);
  return {{"enabled", true},
          {"dir", options_.dir},
          {"interval", options_.interval.count()},
          {"keep_deleted_days", options_.keep_deleted_days},
          {"running", running_},
          {"running_since", running_since_ ? nlohmann::json(unix_seconds(*running_since_)) : nlohmann::json(nullptr)},
          {"passes", passes_},
          {"last_pass", last_pass_}};
}

}  // namespace agentbox::backup
