#include "api/storage_full.hpp"

#include <fmt/format.h>

#include "config/units.hpp"
#include "fs/trash.hpp"

namespace agentbox::api {

using namespace agentbox::http;  // the HTTP library, spoken unqualified

bool make_room_from_trash(accounts::AccountDirectory& callers, const accounts::Caller& caller, uint64_t wanted) {
  AccountVolumes& volumes = callers.volumes();
  const VolumeUsage start = volumes.usage(caller.account.name);
  if (start.bytes_limit == 0) return false;  // no quota: the state filesystem itself is full
  Trash trash(callers.volume_of(caller.account).trash, *caller.home);
  bool freed = false;
  for (VolumeUsage u = start;
       u.bytes_limit - std::min(u.bytes_used, u.bytes_limit) < wanted || u.inodes_used >= u.inodes_limit;
       u = volumes.usage(caller.account.name)) {
    if (!trash.purge_oldest()) break;
    freed = true;
  }
  return freed;
}

void throw_storage_full(accounts::AccountDirectory& callers, const accounts::Caller& caller, const FsError& e) {
  const VolumeUsage u = callers.volumes().usage(caller.account.name);
  const DiskQuota q = callers.volumes().quota(caller.account.name);
  if (u.bytes_limit == 0) throw e;
  // The quota as configured; the usage as the filesystem counts it (its own bookkeeping takes
  // a little of the quota, so "full" can read as somewhat less than the quota).
  throw FsError(FsErrorKind::insufficient_storage,
                fmt::format("Disk quota exceeded: {} (your quota: {} and {} files; in use: {} and {} files, "
                            "trash included: see GET /files/trash)",
                            e.what(), format_size(q.bytes), q.inodes, format_size(u.bytes_used), u.inodes_used),
                e.code());
}

}  // namespace agentbox::api
