#include "accounts/directory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "fs/dir_list.hpp"
#include "fs/fs_error.hpp"
#include "http/error.hpp"
#include "util/error.hpp"

namespace agentbox::accounts {


namespace {

// External ids are opaque strings from the front end; a bound keeps the store and the logs sane.
constexpr size_t kMaxUserIdBytes = 256;

}  // namespace

AccountDirectory::AccountDirectory(AccountStore& accounts, std::string state_dir, CallerCacheLimits limits,
                                 std::shared_ptr<AccountVolumes> volumes)
    : accounts_(accounts),
      state_dir_(std::move(state_dir)),
      volumes_(volumes ? std::move(volumes)
                       : std::make_shared<AccountVolumes>(state_dir_, make_volume_backend(false),
                                                          [](const std::string&) { return DiskQuota{}; })),
      home_idle_(limits.home_idle),
      session_cwds_(std::max<size_t>(limits.session_cwds, 1)),
      homes_(limits.open_homes),
      known_(limits.known_ids) {}

VolumePaths AccountDirectory::volume_of(const Account& account) {
  {
    std::lock_guard lock(mu_);
    refuse_if_deleted_locked(account);
  }
  return volumes_->open({account.name, account.uid, account.gid});
}

void AccountDirectory::refuse_if_deleted_locked(const Account& account) const {
  if (deleted_.contains(account.name))
    throw http::HttpError(http::status::conflict, "This account is being deleted by the operator; try again shortly");
}

void AccountDirectory::begin_delete(const Account& account) {
  std::lock_guard lock(mu_);
  deleted_.insert(account.name);
  homes_.erase(account.name);
  std::erase_if(cwds_, [&](const auto& entry) { return entry.first.first == account.name; });
}

void AccountDirectory::end_delete(const Account& account) {
  std::lock_guard lock(mu_);
  known_.erase(account.external_id);
}

std::string AccountDirectory::host_home(const Account& account) const {
  return state_dir_ + "/" + account.home_dir;
}

AccountDirectory::CacheSizes AccountDirectory::cache_sizes() {
  std::lock_guard lock(mu_);
  return {homes_.size(), known_.size()};
}

std::shared_ptr<const ConfinedDir> AccountDirectory::home_of(const Account& account) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    refuse_if_deleted_locked(account);
    // Idle homes go even below the bound: a held descriptor keeps a directory (and the
    // filesystem under it) busy after its account has left.
    homes_.evict_oldest_while([&](const std::string&, const Home& h) { return now - h.used >= home_idle_; });
    if (Home* found = homes_.find(account.name)) {
      found->used = now;
      return found->dir;
    }
  }
  std::string host = volume_of(account).home;
  auto home = std::make_shared<const ConfinedDir>(
      ConfinedDir::open_home(host, "/home/" + account.name, account.uid, account.gid));
  std::lock_guard lock(mu_);
  refuse_if_deleted_locked(account);  // deleted while it was being opened: not kept
  // Another request may have opened it meanwhile: theirs stays, so one ConfinedDir per account.
  return homes_.insert(account.name, Home{std::move(home), now}).dir;
}

Account AccountDirectory::account_of(std::string_view external_id) {
  constexpr int64_t kTouchEvery = 60;  // seconds; last_seen needs no finer grain
  const auto now = static_cast<int64_t>(::time(nullptr));
  if (account_gate_) account_gate_(external_id);
  {
    std::lock_guard lock(mu_);
    if (Known* known = known_.find(external_id)) {
      if (now - known->touched < kTouchEvery) return known->account;
      known->touched = now;
      Account account = known->account;
      // One UPDATE a minute per account, under our lock: rare enough not to matter.
      accounts_.touch(account.name, now);
      return account;
    }
  }
  std::optional<Account> held;
  if (new_account_check_ && !(held = accounts_.find(external_id))) new_account_check_(external_id);
  Account account = held ? std::move(*held) : accounts_.get_or_create(external_id);
  // A new account was created with last_seen = now: no second write for it.
  int64_t touched = account.last_seen;
  if (now - touched >= kTouchEvery) {
    accounts_.touch(account.name, now);
    touched = now;
  }
  std::lock_guard lock(mu_);
  known_.insert(std::string(external_id), Known{account, touched});
  return account;
}

std::string user_id_of(const http::Request& req, bool query_allowed) {
  std::optional<std::string> user;
  const auto take = [&](std::string_view value, std::string_view from) {
    if (user && *user != value)
      throw http::HttpError(http::status::bad_request, "Two different user ids (" + std::string(from) +
                                                     " disagrees): a request names one user");
    user = std::string(value);
  };
  for (const char* name : {"X-User-Id", "X-OpenWebUI-User-Id"}) {
    auto range = req.headers.equal_range(name);
    if (std::distance(range.first, range.second) > 1)
      throw http::HttpError(http::status::bad_request, std::string(name) + " appears more than once");
    if (range.first != range.second) take(range.first->value(), name);
  }
  if (query_allowed) {
    const auto values = req.query_params("user_id");
    if (values.size() > 1) throw http::HttpError(http::status::bad_request, "user_id appears more than once");
    if (!values.empty()) take(values.front(), "the user_id parameter");
  }
  if (!user || user->empty())
    throw http::HttpError(http::status::bad_request, query_allowed
                                                   ? "Missing user: send X-User-Id or ?user_id= to name the user"
                                                   : "Missing X-User-Id header: every request must name its user");
  if (user->size() > kMaxUserIdBytes)
    throw http::HttpError(http::status::bad_request, "The user id is longer than 256 bytes");
  return std::move(*user);
}

Caller AccountDirectory::resolve(const http::Request& req, bool query_user_allowed) {
  const std::string user = user_id_of(req, query_user_allowed);
  Caller caller;
  caller.account = account_of(user);
  caller.home = home_of(caller.account);
  caller.box_home = caller.home->box_home();
  caller.cwd = caller.box_home;
  auto session = req.header("X-Session-Id");
  if (!session || session->empty()) session = req.header("X-Terminal-Context-Id");
  if (session && !session->empty()) {
    caller.session_id = std::string(*session);
    std::optional<std::string> kept;
    {
      std::lock_guard lock(mu_);
      if (auto it = cwds_.find({caller.account.name, caller.session_id}); it != cwds_.end()) kept = it->second.cwd;
    }
    // A cwd deleted since it was set: the session goes on from the home rather than failing.
    if (kept && is_directory(*caller.home, caller.home->path(*kept))) caller.cwd = *kept;
  }
  return caller;
}

std::string AccountDirectory::set_cwd(const Caller& caller, std::string_view path) {
  if (caller.session_id.empty())
    throw http::HttpError(http::status::bad_request,
                    "Missing X-Session-Id header: the working directory is kept per session");
  HomePath p = caller.home->path(path, caller.cwd);
  if (!is_directory(*caller.home, p))
    throw FsError(FsErrorKind::not_found, "Directory not found: " + p.shown);
  std::lock_guard lock(mu_);
  cwds_[{caller.account.name, caller.session_id}] = SessionCwd{p.shown, ++cwd_clock_};
  // One account's sessions are a contiguous range of the map: past the bound, its least
  // recently set cwd is forgotten (that session starts from the home again).
  auto first = cwds_.lower_bound({caller.account.name, std::string()});
  size_t count = 0;
  auto oldest = first;
  for (auto it = first; it != cwds_.end() && it->first.first == caller.account.name; ++it, ++count)
    if (it->second.set < oldest->second.set) oldest = it;
  if (count > session_cwds_) cwds_.erase(oldest);
  return p.shown;
}

}  // namespace agentbox::accounts
