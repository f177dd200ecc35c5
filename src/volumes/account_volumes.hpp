#pragma once
// Every account's volume (volumes/volume_backend.hpp) and the directories in it:
//   STATE/volumes/NAME/home     the home (the account's, 0700): what its box shows as /home/NAME
//   STATE/volumes/NAME/trash    deleted entries (the account's, 0700), never shown in the box
//   STATE/volumes/NAME/daemon   the daemon's files for the account (root, 0700): process logs,
//                               request bodies being received, archives being built
//   STATE/volumes/.deleted/     volumes of deleted accounts, until purged (a rename away: VOLUMES
//                               is a mount of its own, so nothing can leave it by rename)
// so all of them are charged to the account's quota and nothing it writes reaches the state
// filesystem. A volume is attached (prepared: made once, mounted) on first use and held by
// leases (volumes/volume_lease.hpp) while in use; one no lease holds may be detached again
// (volumes/idle_volumes.hpp) and is attached again on its next use.
//
// Runs on: any thread. Preparing a volume blocks (mkfs, a loop device, a mount: a pool thread's
// work, accounts/caller_routes.hpp); volumes of different accounts are prepared side by side,
// one account's by one thread at a time; detach_unused() on the idle detacher's thread.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "volumes/volume_backend.hpp"
#include "volumes/volume_lease.hpp"

namespace agentbox {

// The inodes a volume holds with nothing in it but what a new account starts with: ext4's
// reserved inodes 1-10 and lost+found (11), then home, trash, daemon and daemon/logs, all four
// empty. Any file, directory or link anywhere (a home entry, a trash item, a process log, a
// workspace, an upload being received) takes one more.
inline constexpr uint64_t kEmptyVolumeInodes = 15;
// Whether a volume of that usage holds nothing but a new account's (a volume with no image,
// never made or forgotten, counts nothing: empty).
inline bool volume_empty(const VolumeUsage& u) { return u.inodes_used <= kEmptyVolumeInodes; }

struct VolumeOwner {
  std::string name;  // the account's name (a directory name: store/account_name.hpp)
  uid_t uid = 0;
  gid_t gid = 0;
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

  // The account's volume, attached (made and mounted on first use, its directories there) and
  // pinned until the lease is dropped.
  // The mirror's lease (for_mirror) leaves the volume as it was, for mirror_wanted().
  VolumeLease lease(const VolumeOwner& owner, bool for_mirror = false);
  // Whether the mirror should copy the volume: attached now, or detached since something but
  // the mirror used it (its last changes perhaps not copied yet). A detached volume's copy
  // then taken (mirror_taken) is its last until it is used again.
  bool mirror_wanted(const std::string& name) const;
  void mirror_taken(const std::string& name);
  // The same for a brief use by path: attached now, its idle window begun again, not pinned
  // (what holds a descriptor in it keeps it mounted: detaching never forces an unmount).
  VolumePaths open(const VolumeOwner& owner) { return lease(owner).paths(); }
  // The paths only (nothing is made or checked).
  VolumePaths paths(const std::string& name) const;
  // Home relative to the state dir ("volumes/NAME/home"): Account::home_dir.
  static std::string home_dir(const std::string& name);

  // Whether the account's volume has been made. An account has none until something needs its
  // disk (a write, a box, a move: whatever takes a lease()); until then its home reads as
  // empty (accounts::HomeUse::read) and costs no disk. The one test of that state: forgetting
  // a volume ([accounts] forget_after_days) returns its account to it.
  bool exists(const std::string& name) const;
  // Mounted or not (an unmounted image is read without mounting it); a volume not made yet
  // holds nothing, its limits the quota's.
  VolumeUsage usage(const std::string& name) const;
  DiskQuota quota(const std::string& name) const { return quota_of_(name); }
  const VolumeBackend& backend() const { return *backend_; }
  // Names of the volumes attached now.
  std::vector<std::string> opened() const;
  size_t attached() const;
  // The volume goes out of use: unmounted, forgotten (opened again on its next use).
  void release(const std::string& name);

  // The attached volumes no lease holds, the least recently used first.
  struct Unleased {
    std::string name;
    VolumeUses::Clock::time_point used;
  };
  std::vector<Unleased> unleased() const;
  // Detaches the volume if no lease has held it since `unused_since`: before_detach(name) first
  // (drop the descriptors kept in it), then an unmount that is never forced. False when it was
  // used meanwhile or something still holds a file in it (it stays attached, its idle window
  // begun again).
  bool detach_unused(const std::string& name, VolumeUses::Clock::time_point unused_since,
                     const std::function<void(const std::string&)>& before_detach);
  // The volume of an account not seen for long goes for good (accounts/account_forgetting.hpp)
  // when it is detached, no one is attaching it (under its lock, as a detach is) and its image
  // holds nothing but a new account's (volume_empty, read from a cleanly unmounted image). The
  // account's next use makes a new, empty one. Returns the bytes of disk freed; nullopt when
  // it stays.
  std::optional<uint64_t> forget_if_empty(const std::string& name);
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
  // The lock of one account's volume: its preparation, detach, release and retirement take turns.
  std::shared_ptr<std::mutex> lock_of(const std::string& name);
  // Marks the volume detached (under uses_->mu) and counts it.
  void forget_attached(const std::string& name);

  std::function<DiskQuota(const std::string&)> quota_of_;
  std::function<void(const std::string&)> hold_;
  // Attached volumes and their leases; its mutex guards retired_ too, never held while preparing.
  std::shared_ptr<VolumeUses> uses_ = std::make_shared<VolumeUses>();
  std::set<std::string> retired_;                      // accounts deleted during this run
  std::set<std::string> unmirrored_;                   // detached since used, not mirrored since
  std::map<std::string, std::string> home_overrides_;  // set_home: written before any reader
};

}  // namespace agentbox
