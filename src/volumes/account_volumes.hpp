#pragma once
// Every account's volume (volumes/volume_backend.hpp) and the directories in it:
//   STATE/volumes/NAME/home     the home (the account's, 0700): what its box shows as /home/NAME
//   STATE/volumes/NAME/trash    deleted entries (the account's, 0700), never shown in the box
//   STATE/volumes/NAME/daemon   the daemon's files for the account (root, 0700): process logs,
//                               request bodies being received, archives being built
//   STATE/volumes/.deleted/     volumes of deleted accounts, until purged (a rename away: VOLUMES
//                               is a mount of its own, so nothing can leave it by rename)
// so all of them are charged to the account's quota and nothing it writes reaches the state
// filesystem. A volume is prepared once per daemon run and per account.
//
// Runs on: any thread. Preparing a volume blocks (mkfs, a loop device, a mount: a pool thread's
// work, accounts/caller_routes.hpp); volumes of different accounts are prepared side by side,
// one account's by one thread at a time.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "volumes/volume_backend.hpp"

namespace agentbox {

struct VolumeOwner {
  std::string name;  // the account's name (a directory name: store/account_name.hpp)
  uid_t uid = 0;
  gid_t gid = 0;
};

struct VolumePaths {
  std::string root, home, trash, daemon;
};

class AccountVolumes {
 public:
  // quota_of(name) is the account's disk and inode quota (the config's, with per-user overrides).
  AccountVolumes(std::string state_dir, std::unique_ptr<VolumeBackend> backend,
                 std::function<DiskQuota(const std::string& name)> quota_of);
  // Unmounts the volumes it prepared (a box still running keeps its own view until it ends).
  ~AccountVolumes();
  AccountVolumes(const AccountVolumes&) = delete;
  AccountVolumes& operator=(const AccountVolumes&) = delete;

  // The account's volume, ready: made and mounted on first use, its directories there.
  VolumePaths open(const VolumeOwner& owner);
  // The paths only (nothing is made or checked).
  VolumePaths paths(const std::string& name) const;
  // Home relative to the state dir ("volumes/NAME/home"): Account::home_dir.
  static std::string home_dir(const std::string& name);

  // Mounted or not (an unmounted image is read without mounting it).
  VolumeUsage usage(const std::string& name) const;
  DiskQuota quota(const std::string& name) const { return quota_of_(name); }
  const VolumeBackend& backend() const { return *backend_; }
  // Names of the volumes prepared by this daemon run (the ones in use).
  std::vector<std::string> opened() const;
  // The volume goes out of use: unmounted, forgotten (opened again on its next use).
  void release(const std::string& name);
  // The account's home is this directory, outside its volume (`agentbox mcp` as an ordinary
  // user: the run home, which it cannot bind over the volume's). Set before the account's
  // first use.
  void set_home(const std::string& name, std::string host_dir) { home_overrides_[name] = std::move(host_dir); }
  // Test hook (tests/e2e, the daemon's AGENTBOX_TEST_HOLD_VOLUME): called before a volume is
  // prepared, on the preparing thread, so a test can make one account's volume slow. Set
  // before use.
  void set_hold(std::function<void(const std::string& name)> hold) { hold_ = std::move(hold); }
  // The account is deleted: its volume is unmounted and its image and directory move to
  // VOLUMES/.deleted/<unix ms, 13 digits>-NAME (returned), kept there until purge_retired().
  // From now on open() refuses the name for the rest of this run.
  std::string retire(const std::string& name);
  // Deletes for good the retired volumes older than cutoff (unix seconds); returns how many.
  size_t purge_retired(int64_t cutoff);

 private:
  std::string volumes_dir_;
  std::unique_ptr<VolumeBackend> backend_;
  // The lock of one account's volume: its preparation, release and retirement take turns.
  std::shared_ptr<std::mutex> lock_of(const std::string& name);

  std::function<DiskQuota(const std::string&)> quota_of_;
  std::function<void(const std::string&)> hold_;
  mutable std::mutex mu_;          // guards the sets and the map below, never held while preparing
  std::set<std::string> ready_;    // volumes prepared by this daemon run
  std::set<std::string> retired_;  // accounts deleted during this run
  std::map<std::string, std::shared_ptr<std::mutex>> locks_;  // by name, while not ready
  std::map<std::string, std::string> home_overrides_;         // set_home: written before any reader
};

}  // namespace agentbox
