#include "accounts/directory.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "accounts/context_id.hpp"
#include "accounts/workspaces.hpp"
#include "fs/dir_list.hpp"
#include "fs/fs_error.hpp"
#include "http/error.hpp"
#include "util/error.hpp"

namespace agentbox::accounts {

namespace {

int64_t unix_now() { return static_cast<int64_t>(::time(nullptr)); }

constexpr const char* kEmptyHome = "/empty-home";

// STATE/empty-home: an empty directory no account may write (root's, 0555; the daemon's own
// when it runs as an ordinary user, still 0555: file routes run with the account's fs identity).
void make_empty_home(const std::string& state_dir) {
  const std::string dir = state_dir + kEmptyHome;
  if (::mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + state_dir + ")");
  if (::mkdir(dir.c_str(), 0555) != 0 && errno != EEXIST) throw sys_error("mkdir(" + dir + ")");
  check(::chmod(dir.c_str(), 0555), "chmod(" + dir + ")");  // past the umask, and as it must stay
}

}  // namespace

AccountDirectory::AccountDirectory(AccountStore& accounts, std::string state_dir, CallerCacheLimits limits,
                                   std::shared_ptr<AccountVolumes> volumes, AdmissionSources admission)
    : state_dir_(std::move(state_dir)),
      volumes_(volumes ? std::move(volumes)
                       : std::make_shared<AccountVolumes>(state_dir_, make_volume_backend(false),
                                                          [](const std::string&) { return DiskQuota{}; })),
      identities_(accounts, limits.known_ids),
      admission_(admission),
      homes_(limits.open_homes, limits.home_idle),
      cwds_(limits.session_cwds) {
  make_empty_home(state_dir_);
}

VolumePaths AccountDirectory::volume_of(const Account& account) {
  admission_.check_deleted(account);
  return volumes_->open({account.name, account.uid, account.gid});
}

VolumeLease AccountDirectory::lease_volume(const Account& account) {
  admission_.check_deleted(account);
  return volumes_->lease({account.name, account.uid, account.gid});
}

void AccountDirectory::begin_delete(const Account& account) {
  admission_.begin_delete(account.name);
  homes_.close(account.name);
  cwds_.forget(account.name);
}

void AccountDirectory::end_delete(const Account& account) { identities_.forget(account.external_id); }

std::string AccountDirectory::workspace_path(const Account& account, std::string_view profile,
                                             std::string_view context) const {
  return volumes_->paths(account.name).root + "/workspaces/" + std::string(profile) + "/" + context_hash(context);
}

std::string AccountDirectory::make_workspace(const Account& account, std::string_view profile,
                                             std::string_view context) {
  const std::string path = workspace_path(account, profile, context);
  const std::string parent = path.substr(0, path.rfind('/'));
  // The daemon's, in the volume's root, where no box reaches: the box sees one workspace only.
  for (const std::string& dir : {parent.substr(0, parent.rfind('/')), parent})
    if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) throw sys_error("mkdir(" + dir + ")");
  if (::mkdir(path.c_str(), 0700) == 0) {
    if (::chown(path.c_str(), account.uid, account.gid) != 0) throw sys_error("chown(" + path + ")");
  } else if (errno == ENOSPC || errno == EDQUOT) {  // the account's volume is full: its quota's 507
    throw FsError(FsErrorKind::insufficient_storage, "Disk quota exceeded: no room for this context's workspace",
                  errno);
  } else if (errno != EEXIST) {
    throw sys_error("mkdir(" + path + ")");
  }
  note_workspace_use(path, context);  // its last use, for the operator and keep_days
  return path;
}

std::string AccountDirectory::host_home(const Account& account) const { return state_dir_ + "/" + account.home_dir; }

AccountDirectory::CacheSizes AccountDirectory::cache_sizes() { return {homes_.size(), identities_.size()}; }

std::shared_ptr<const ConfinedDir> AccountDirectory::home_of(const Account& account) {
  const auto now = OpenHomes::Clock::now();
  admission_.check_deleted(account);
  if (auto home = homes_.find(account.name, now)) return home;
  std::string host = volume_of(account).home;
  auto opened = homes_.keep(account.name,
                            std::make_shared<const ConfinedDir>(
                                ConfinedDir::open_home(host, "/home/" + account.name, account.uid, account.gid)),
                            now);
  // Deleted while it was being opened: not kept (begin_delete closes what it finds, and this
  // sees the deletion begun before it kept its own).
  if (admission_.deleted(account.name)) {
    homes_.close(account.name);
    admission_.check_deleted(account);
  }
  return opened;
}

std::shared_ptr<const ConfinedDir> AccountDirectory::empty_home(const Account& account) const {
  return std::make_shared<const ConfinedDir>(
      ConfinedDir::open_home(state_dir_ + kEmptyHome, "/home/" + account.name, account.uid, account.gid));
}

Account AccountDirectory::account_of(std::string_view external_id) {
  std::optional<Account> held = identities_.find(external_id);  // memory, else the store
  admission_.check(external_id, held ? &*held : nullptr);
  if (!held) {
    admission_.check_new(external_id);  // max_accounts, the uid range, new_per_minute
    try {
      return identities_.create(external_id);
    } catch (const AccountsFull& full) {  // another creation took the last room meanwhile
      admission_.refuse_full(external_id, full);
    }
  }
  identities_.touch(*held, unix_now());
  return *held;
}

bool AccountDirectory::ready(const http::Request& req, bool query_user_allowed) {
  std::string user;
  try {
    user = user_id_of(req, query_user_allowed);
  } catch (const http::HttpError&) {
    return true;
  }
  std::optional<Account> account = identities_.cached(user, unix_now());
  return account && homes_.find(account->name, OpenHomes::Clock::now()) != nullptr;
}

Account AccountDirectory::account_for(const http::Request& req) { return account_of(user_id_of(req)); }

Caller AccountDirectory::resolve(const http::Request& req, bool query_user_allowed, HomeUse use) {
  const std::string user = user_id_of(req, query_user_allowed);
  Caller caller;
  caller.profile = req.scope;
  if (!caller.profile.empty() && context_isolated_ && context_isolated_(caller.profile)) {
    std::string context = context_id_of(req);
    if (context != kDefaultContext) caller.context = std::move(context);
  }
  caller.account = account_of(user);
  caller.box = box_key(caller.account.name, caller.profile, caller.context);
  if (use == HomeUse::read && !volumes_->exists(caller.account.name)) {
    // Nothing written yet: its home, and any workspace in it, is empty; nothing is made.
    admission_.check_deleted(caller.account);
    caller.home = empty_home(caller.account);
  } else {
    caller.volume = std::make_shared<const VolumeLease>(lease_volume(caller.account));
    caller.home = home_of(caller.account);
  }
  if (!caller.context.empty() && caller.volume) {
    // The context sees its workspace as its home, and nothing of the home itself.
    caller.workspace = make_workspace(caller.account, caller.profile, caller.context);
    caller.home = std::make_shared<const ConfinedDir>(ConfinedDir::open_home(
        caller.workspace, "/home/" + caller.account.name, caller.account.uid, caller.account.gid));
  }
  caller.box_home = caller.home->box_home();
  caller.cwd = caller.box_home;
  auto session = req.header("X-Session-Id");
  if (!session || session->empty()) session = req.header("X-Terminal-Context-Id");
  if (session && !session->empty()) {
    caller.session_id = std::string(*session);
    std::optional<std::string> kept = cwds_.find(caller.box, caller.session_id);
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
  if (!is_directory(*caller.home, p)) throw FsError(FsErrorKind::not_found, "Directory not found: " + p.shown);
  cwds_.set(caller.box, caller.session_id, p.shown);
  return p.shown;
}

}  // namespace agentbox::accounts
