#pragma once
// Who a request is for: the account named by X-User-Id (created on first sight, with its own
// uid and home), whether this node may serve it (accounts/admission.hpp), its confined home and
// the session's working directory (X-Session-Id). Every route that touches a box or a file
// starts by resolving its caller; the routes that run on the API's io thread have it resolved
// first, off that thread when it is slow (accounts/caller_routes.hpp).
//
// The registry is its parts, each a class of its own:
//   identities    external id → account (the store's; recent ones in memory)    identities.hpp
//   admission     may this user be served here: one decision                    admission.hpp
//   volumes       each account's volume, made and mounted on first use          volumes/account_volumes.hpp
//   open homes    the home descriptors kept open, bounded                       open_homes.hpp
//   session cwds  each session's working directory, bounded per account         session_cwds.hpp
//
// Runs on: any thread. ready() and a resolve() of a ready caller cost memory (and a stat of
// the session's cwd); any other resolve() may run SQL, make and mount a volume (mkfs, a loop
// device, an fsck), so it belongs on a pool thread.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "accounts/admission.hpp"
#include "accounts/identities.hpp"
#include "accounts/open_homes.hpp"
#include "accounts/session_cwds.hpp"
#include "accounts/user_id.hpp"
#include "fs/confined_dir.hpp"
#include "http/request.hpp"
#include "store/account_store.hpp"
#include "store/box_key.hpp"
#include "volumes/account_volumes.hpp"

namespace agentbox {
class FairPool;
}

namespace agentbox::accounts {

// What a request does with its account's disk, which decides whether resolving it makes the
// account's volume (volumes/account_volumes.hpp):
//   write  it may write, or needs a box: the volume is made on first use and attached
//   read   it only reads the home: an account with no volume yet is served an empty home
//          (read-only, shared by all such accounts) and none is made; one that has a volume
//          gets it, attached, as a write would
enum class HomeUse { write, read };

struct Caller {
  Account account;
  // Pins the account's volume while the request runs (volumes/volume_lease.hpp): taken first.
  // Null for a HomeUse::read request of an account with no volume yet: `home` is then empty.
  std::shared_ptr<const VolumeLease> volume;
  std::shared_ptr<const ConfinedDir> home;  // the account's home; all file access goes through it
  std::string box_home;                     // "/home/NAME": the home as the box sees it
  std::string session_id;                   // X-Session-Id, "" when absent
  std::string cwd;                          // the session's cwd as the box sees it (default box_home)
  std::string profile;                      // the request's profile (/p/NAME: req.scope); "" the default
  // The key of the box its commands, terminals and /proxy go to (store/box_key.hpp): the
  // account's name under the default profile, NAME~PROFILE under another, NAME~PROFILE~HASH
  // for a context of a profile with isolation "context".
  std::string box;
  std::string context;    // that context (X-Terminal-Context-Id); "" when the box is not a context's
  std::string workspace;  // the context's workspace on the host, shown as its home; "" the home

  BoxPlace place() const { return {box, profile, workspace}; }
};

// What AccountDirectory keeps in memory. Past these bounds it forgets the least recently used
// entries and loads them again on the next request: the store and the homes on disk are the
// truth, so any number of user ids costs the daemon a bounded number of descriptors.
struct CallerCacheLimits {
  size_t open_homes = 256;              // home directory descriptors kept open ([accounts] open_homes)
  size_t known_ids = 4096;              // external id → account entries kept
  std::chrono::seconds home_idle{600};  // a home unused this long is closed (at the next request)
  size_t session_cwds = 256;            // cwds kept per account; past it the least recently set goes
};

class AccountDirectory {
 public:
  // Every account's home is in its volume (volumes/account_volumes.hpp); without `volumes`, plain
  // directories under state_dir (no quota). `admission` names what refuses users on this node
  // (none: only deleted accounts are refused).
  AccountDirectory(AccountStore& accounts, std::string state_dir, CallerCacheLimits limits = {},
                   std::shared_ptr<AccountVolumes> volumes = nullptr, AdmissionSources admission = {});

  // The caller of req (user_id_of). Refuses users this node may not serve (Admission: 503, 421,
  // 409) and new users past the creation limits (429, 503). Creates the account and its home
  // (owned by the account's uid, 0700) on first sight; records activity. The session is
  // X-Session-Id, else X-Terminal-Context-Id; a session cwd that is no longer a directory falls
  // back to the home.
  // `use` read: an account with no volume yet (a new one included) gets none made (HomeUse).
  Caller resolve(const http::Request& req, bool query_user_allowed = false, HomeUse use = HomeUse::write);
  // The account req names (admitted, made on first sight) without resolving its box or making
  // a workspace: for the routes that act on a context's workspace from outside it.
  Account account_for(const http::Request& req);
  // Whether resolve(req) costs memory only now: the account is in memory with no last_seen
  // write due and its home is open (its volume mounted). A request that names no valid user is
  // ready too: resolving it fails at once with its 400.
  bool ready(const http::Request& req, bool query_user_allowed = false);
  // Where callers that are not ready are resolved (caller_routes.hpp); none: on the asking
  // thread. Set before serving. Held weakly: the routes that use it hold it, as offload()'s do.
  void set_pool(std::weak_ptr<FairPool> pool) { pool_ = std::move(pool); }
  std::shared_ptr<FairPool> pool() const { return pool_.lock(); }
  // Whether a profile gives each context (X-Terminal-Context-Id but "default") a box and a
  // workspace of its own (isolation "context"); unset: no profile does. Set before serving.
  using ContextIsolation = std::function<bool(std::string_view profile)>;
  void set_context_isolation(ContextIsolation isolated) { context_isolated_ = std::move(isolated); }
  // Where a context's workspace is kept: in the account's volume, beside (not in) its home.
  std::string workspace_path(const Account& account, std::string_view profile, std::string_view context) const;

  // POST /files/cwd: the session's cwd becomes `path` (any accepted form); it must be an
  // existing directory inside the home (FsError otherwise). Without a session id the cwd
  // cannot be kept: HttpError 400.
  std::string set_cwd(const Caller& caller, std::string_view path);

  // Host path of the account's home.
  std::string host_home(const Account& account) const;
  // The account's home (opened, its volume ready), as resolve() gives it.
  std::shared_ptr<const ConfinedDir> home(const Account& account) { return home_of(account); }
  // The account's volume, ready (mounted): its home, trash and the daemon's files for it.
  VolumePaths volume_of(const Account& account);
  AccountVolumes& volumes() { return *volumes_; }
  // The account's volume, attached and pinned while the lease lives.
  VolumeLease lease_volume(const Account& account);
  // The account's volume is being detached: its home descriptor kept open goes (else the
  // unmount is busy). Requests that hold one keep theirs, and the unmount waits for them.
  void close_home(const std::string& name) { homes_.close(name); }

  // Who may be served here (the operator's routes ask it too: an account being moved is not
  // deleted meanwhile).
  const Admission& admission() const { return admission_; }

  // DELETE /admin/accounts: from begin_delete on, every request for the account is refused with
  // 409 and its open home and session cwds are forgotten; after end_delete its external id
  // makes a new account on its next request (the old name stays refused).
  void begin_delete(const Account& account);
  void end_delete(const Account& account);

  // Entries held now, never above CallerCacheLimits: for /metrics and tests.
  struct CacheSizes {
    size_t open_homes = 0;
    size_t known_ids = 0;
  };
  CacheSizes cache_sizes();

 private:
  // The account of an external id, admitted (Admission::check), made on first sight.
  Account account_of(std::string_view external_id);
  // The context's workspace, made (owned by the account, 0700) when it is new; its host path.
  std::string make_workspace(const Account& account, std::string_view profile, std::string_view context);
  // The account's home, opened again if it is not open.
  std::shared_ptr<const ConfinedDir> home_of(const Account& account);
  // The empty home of an account with no volume: STATE/empty-home, root's and read-only to
  // every account (a write there fails with 403 instead of reaching the state filesystem).
  std::shared_ptr<const ConfinedDir> empty_home(const Account& account) const;

  std::string state_dir_;
  std::shared_ptr<AccountVolumes> volumes_;
  std::weak_ptr<FairPool> pool_;
  ContextIsolation context_isolated_;
  Identities identities_;
  Admission admission_;
  OpenHomes homes_;
  SessionCwds cwds_;
};

}  // namespace agentbox::accounts
