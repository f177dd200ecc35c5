#include "volumes/account_volumes.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>

#include <fmt/format.h>

#include "fs/dir_entries.hpp"
#include "fs/entry_ops.hpp"
#include "metrics/events.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

constexpr const char* kDeletedDir = ".deleted";

// mkdir owned by uid:gid with `mode`; an existing one is left as it is (an operator may have
// changed it on purpose). An ordinary user's daemon (`agentbox mcp`) keeps what it makes: its
// one account is itself, and it could give a directory to no one else.
void ensure_dir(const std::string& path, mode_t mode, uid_t uid, gid_t gid) {
  if (::mkdir(path.c_str(), mode) == 0) {
    if (::geteuid() == 0) check(::chown(path.c_str(), uid, gid), "chown(" + path + ")");
    check(::chmod(path.c_str(), mode), "chmod(" + path + ")");  // past the umask
    return;
  }
  if (errno != EEXIST) throw sys_error("mkdir(" + path + ")");
}

// The volumes mounted in VOLUMES now (each on a device of its own): left by an earlier run killed
// before it could unmount them.
std::vector<std::string> mounted_volumes(const std::string& volumes_dir) {
  std::vector<std::string> found;
  UniqueFd dir(::open(volumes_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat top {};
  if (!dir || ::fstat(dir.get(), &top) != 0) return found;
  for (const DirEntry& e : read_dir_entries(dir.get(), volumes_dir)) {
    if (e.name.starts_with('.') || (e.type != DT_DIR && e.type != DT_UNKNOWN)) continue;
    struct stat st {};
    if (::fstatat(dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
        st.st_dev != top.st_dev)
      found.push_back(e.name);
  }
  return found;
}

}  // namespace

AccountVolumes::AccountVolumes(std::string state_dir, std::unique_ptr<VolumeBackend> backend,
                               std::function<DiskQuota(const std::string&)> quota_of)
    : volumes_dir_(state_dir + "/volumes"), backend_(std::move(backend)), quota_of_(std::move(quota_of)) {
  if (::mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + state_dir + ")");
  // Search permission only: the daemon reaches each volume by name, no one lists them.
  if (::mkdir(volumes_dir_.c_str(), 0711) != 0 && errno != EEXIST) throw sys_error("mkdir(" + volumes_dir_ + ")");
  backend_->open_root(volumes_dir_);
  // Attached as if used now: the detacher lets them go when idle, the mirror copies them first.
  for (const std::string& name : mounted_volumes(volumes_dir_)) {
    VolumeUses::Use& use = uses_->by_name[name];
    use.lock = std::make_shared<std::mutex>();
    use.attached = use.touched = true;
    use.used = VolumeUses::Clock::now();
    metrics::add(metrics::events().volumes_attached, 1);
  }
}

AccountVolumes::~AccountVolumes() {
  for (const std::string& name : opened()) {
    try {
      backend_->release(paths(name).root);
    } catch (const Error&) {
      // Left to close_root's detach; the next daemon mounts its loop device again (LoopHolders).
    }
  }
  backend_->close_root(volumes_dir_);
}

std::string AccountVolumes::home_dir(const std::string& name) { return "volumes/" + name + "/home"; }

VolumePaths AccountVolumes::paths(const std::string& name) const {
  VolumePaths p;
  p.root = volumes_dir_ + "/" + name;
  auto own = home_overrides_.find(name);
  p.home = own != home_overrides_.end() ? own->second : p.root + "/home";
  p.trash = p.root + "/trash";
  p.daemon = p.root + "/daemon";
  return p;
}

std::shared_ptr<std::mutex> AccountVolumes::lock_of(const std::string& name) {
  std::lock_guard lock(uses_->mu);
  std::shared_ptr<std::mutex>& one = uses_->by_name[name].lock;
  if (!one) one = std::make_shared<std::mutex>();
  return one;
}

void AccountVolumes::forget_attached(const std::string& name) {
  auto it = uses_->by_name.find(name);
  if (it == uses_->by_name.end() || !it->second.attached) return;
  it->second.attached = false;
  metrics::add(metrics::events().volumes_attached, -1);
}

VolumeLease AccountVolumes::lease(const VolumeOwner& owner, bool for_mirror) {
  VolumePaths p = paths(owner.name);
  const auto pin = [&](VolumeUses::Use& use) {
    ++use.leases;
    use.touched = use.touched || !for_mirror;
    return VolumeLease(uses_, owner.name, p);
  };
  {
    std::lock_guard lock(uses_->mu);
    auto it = uses_->by_name.find(owner.name);
    if (it != uses_->by_name.end() && it->second.attached) return pin(it->second);
  }
  for (;;) {
    const std::shared_ptr<std::mutex> one = lock_of(owner.name);
    std::lock_guard preparing(*one);
    {
      std::lock_guard lock(uses_->mu);
      VolumeUses::Use& use = uses_->by_name[owner.name];
      if (use.lock != one) continue;      // detached and forgotten while this waited: the new lock
      if (use.attached) return pin(use);  // prepared by the request this one waited for
      if (retired_.contains(owner.name)) throw Error("the account " + owner.name + " has been deleted", ENOENT);
    }
    if (hold_) hold_(owner.name);
    backend_->prepare(p.root, quota_of_(owner.name));
    ensure_dir(p.home, 0700, owner.uid, owner.gid);
    ensure_dir(p.trash, 0700, owner.uid, owner.gid);
    ensure_dir(p.daemon, 0700, 0, 0);
    ensure_dir(p.daemon + "/logs", 0700, 0, 0);
    std::lock_guard lock(uses_->mu);
    VolumeUses::Use& use = uses_->by_name[owner.name];
    use.attached = true;
    use.used = VolumeUses::Clock::now();
    metrics::add(metrics::events().volumes_attached, 1);
    metrics::add(metrics::events().volume_attaches);
    return pin(use);
  }
}

bool AccountVolumes::mirror_wanted(const std::string& name) const {
  std::lock_guard lock(uses_->mu);
  auto it = uses_->by_name.find(name);
  return (it != uses_->by_name.end() && it->second.attached) || unmirrored_.contains(name);
}

void AccountVolumes::mirror_taken(const std::string& name) {
  std::lock_guard lock(uses_->mu);
  unmirrored_.erase(name);
}

std::vector<std::string> AccountVolumes::opened() const {
  std::vector<std::string> names;
  std::lock_guard lock(uses_->mu);
  for (const auto& [name, use] : uses_->by_name)
    if (use.attached) names.push_back(name);
  return names;
}

size_t AccountVolumes::attached() const {
  std::lock_guard lock(uses_->mu);
  size_t n = 0;
  for (const auto& [name, use] : uses_->by_name) n += use.attached ? 1 : 0;
  return n;
}

std::vector<AccountVolumes::Unleased> AccountVolumes::unleased() const {
  std::vector<Unleased> found;
  {
    std::lock_guard lock(uses_->mu);
    for (const auto& [name, use] : uses_->by_name)
      if (use.attached && use.leases == 0) found.push_back({name, use.used});
  }
  std::sort(found.begin(), found.end(), [](const Unleased& a, const Unleased& b) { return a.used < b.used; });
  return found;
}

bool AccountVolumes::detach_unused(const std::string& name, VolumeUses::Clock::time_point unused_since,
                                   const std::function<void(const std::string&)>& before_detach) {
  const std::shared_ptr<std::mutex> one = lock_of(name);
  std::lock_guard detaching(*one);
  {
    std::lock_guard lock(uses_->mu);
    auto it = uses_->by_name.find(name);
    if (it == uses_->by_name.end() || it->second.lock != one || !it->second.attached || it->second.leases > 0 ||
        it->second.used > unused_since)
      return false;
    // From here a new lease waits for this volume's lock, and attaches it again.
    forget_attached(name);
    if (it->second.touched) unmirrored_.insert(name);
  }
  bool detached = false;
  try {
    if (before_detach) before_detach(name);
    detached = backend_->detach(paths(name).root);
  } catch (const std::exception&) {
    detached = false;
  }
  std::lock_guard lock(uses_->mu);
  auto it = uses_->by_name.find(name);
  if (detached) {
    metrics::add(metrics::events().volume_detaches);
    if (it != uses_->by_name.end() && it->second.leases == 0) uses_->by_name.erase(it);
    return true;
  }
  if (it != uses_->by_name.end()) {  // still mounted: in use by something holding a file
    it->second.attached = true;
    it->second.used = VolumeUses::Clock::now();
    metrics::add(metrics::events().volumes_attached, 1);
  }
  return false;
}

bool AccountVolumes::exists(const std::string& name) const {
  {
    std::lock_guard lock(uses_->mu);
    auto it = uses_->by_name.find(name);
    if (it != uses_->by_name.end() && it->second.attached) return true;
  }
  return home_overrides_.contains(name) || backend_->made(paths(name).root);
}

VolumeUsage AccountVolumes::usage(const std::string& name) const {
  if (exists(name)) return backend_->usage(paths(name).root);
  VolumeUsage none;
  if (backend_->kind() == VolumeKind::plain) return none;  // unbounded, as a plain volume's
  const DiskQuota q = quota_of_(name);
  none.bytes_limit = q.bytes;
  none.inodes_limit = q.inodes;
  return none;
}

std::optional<uint64_t> AccountVolumes::forget_if_empty(const std::string& name) {
  if (home_overrides_.contains(name)) return std::nullopt;  // its home is not in the volume
  const std::shared_ptr<std::mutex> one = lock_of(name);
  std::lock_guard forgetting(*one);  // a lease() attaching it waits here, then makes a new one
  {
    std::lock_guard lock(uses_->mu);
    auto it = uses_->by_name.find(name);
    if (it == uses_->by_name.end() || it->second.lock != one || it->second.attached || it->second.leases > 0 ||
        retired_.contains(name))
      return std::nullopt;
  }
  std::optional<uint64_t> freed = backend_->remove_if_empty(paths(name).root, volume_empty);
  std::lock_guard lock(uses_->mu);
  if (freed) unmirrored_.erase(name);  // nothing left to copy
  auto it = uses_->by_name.find(name);
  if (it != uses_->by_name.end() && !it->second.attached && it->second.leases == 0) uses_->by_name.erase(it);
  return freed;
}

void AccountVolumes::release(const std::string& name) {
  const std::shared_ptr<std::mutex> one = lock_of(name);
  std::lock_guard releasing(*one);
  backend_->release(paths(name).root);
  std::lock_guard lock(uses_->mu);
  forget_attached(name);
}

std::string AccountVolumes::retire(const std::string& name) {
  VolumePaths p = paths(name);
  const std::shared_ptr<std::mutex> one = lock_of(name);
  std::lock_guard retiring(*one);
  {
    std::lock_guard lock(uses_->mu);
    retired_.insert(name);
    forget_attached(name);
  }
  backend_->release(p.root);
  const std::string deleted = volumes_dir_ + "/" + kDeletedDir;
  if (::mkdir(deleted.c_str(), 0700) != 0 && errno != EEXIST) throw sys_error("mkdir(" + deleted + ")");
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::string into = fmt::format("{}/{:013d}-{}", deleted, ms, name);
  if (::mkdir(into.c_str(), 0700) != 0) throw sys_error("mkdir(" + into + ")");
  for (const std::string& suffix : {std::string(), std::string(".img")}) {
    const std::string from = p.root + suffix, to = into + "/" + name + suffix;
    if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT) throw sys_error("rename(" + from + ", " + to + ")");
  }
  return into;  // retired: no lease() prepares it again, whichever lock it waited on
}

size_t AccountVolumes::purge_retired(int64_t cutoff) {
  const std::string deleted = volumes_dir_ + "/" + kDeletedDir;
  UniqueFd dir(::open(deleted.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    if (errno == ENOENT) return 0;
    throw sys_error("open(" + deleted + ")");
  }
  size_t purged = 0;
  for (const DirEntry& e : read_dir_entries(dir.get(), deleted)) {
    const std::string& entry = e.name;
    // <13-digit unix ms>-NAME; anything else is not ours and stays.
    if (entry.size() < 15 || entry[13] != '-') continue;
    int64_t ms = 0;
    auto [end, ec] = std::from_chars(entry.data(), entry.data() + 13, ms);
    if (ec != std::errc() || end != entry.data() + 13 || ms / 1000 >= cutoff) continue;
    remove_tree_at(dir.get(), entry, deleted + "/" + entry);
    ++purged;
  }
  return purged;
}

}  // namespace agentbox
