#include "fs/fs_identity.hpp"

#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "util/error.hpp"
#include "util/log.hpp"

namespace agentbox {
namespace {

// setfsuid/setfsgid return the previous value whether or not they succeeded; calling them with
// -1 (never a valid id) changes nothing and reports the current one: that is the only check.
uid_t query_fsuid() { return static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))); }
gid_t query_fsgid() { return static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1))); }

bool set_fsuid(uid_t uid) {
  ::setfsuid(uid);
  return query_fsuid() == uid;
}
bool set_fsgid(gid_t gid) {
  ::setfsgid(gid);
  return query_fsgid() == gid;
}

// This thread only (see the header).
long set_thread_groups(const std::vector<gid_t>& groups) {
  return ::syscall(SYS_setgroups, groups.size(), groups.empty() ? nullptr : groups.data());
}

std::vector<gid_t> thread_groups() {
  int n = ::getgroups(0, nullptr);
  check(n, "getgroups");
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (n > 0) check(::getgroups(n, groups.data()), "getgroups");
  return groups;
}

// A thread that cannot get its identity back would go on serving other accounts with this
// one's: stopping the daemon is the only safe answer.
[[noreturn]] void die_restoring(const char* what) {
  log::error("fs", "cannot restore the thread's {} after a file operation; stopping", what);
  std::abort();
}

}  // namespace

FsIdentity::FsIdentity(uid_t uid, gid_t gid) : old_uid_(query_fsuid()), old_gid_(query_fsgid()) {
  // An ordinary user's daemon (`agentbox mcp`) serves only its own uid: the thread already is
  // the account, and could not drop its groups or take another gid. Root's never matches (no
  // account is uid 0).
  if (uid != 0 && old_uid_ == uid) {
    unchanged_ = true;
    return;
  }
  old_groups_ = thread_groups();
  if (!old_groups_.empty()) check(set_thread_groups({}), "setgroups([]) for this thread");
  // gid first: changing the fsuid away from 0 is what drops the fs capabilities.
  if (!set_fsgid(gid)) {
    if (!old_groups_.empty() && set_thread_groups(old_groups_) != 0) die_restoring("groups");
    throw Error("setfsgid(" + std::to_string(gid) + "): not taken", EPERM);
  }
  if (!set_fsuid(uid)) {
    if (!set_fsgid(old_gid_)) die_restoring("fsgid");
    if (!old_groups_.empty() && set_thread_groups(old_groups_) != 0) die_restoring("groups");
    throw Error("setfsuid(" + std::to_string(uid) + "): not taken", EPERM);
  }
}

FsIdentity::~FsIdentity() {
  if (unchanged_) return;
  if (!set_fsuid(old_uid_)) die_restoring("fsuid");
  if (!set_fsgid(old_gid_)) die_restoring("fsgid");
  if (!old_groups_.empty() && set_thread_groups(old_groups_) != 0) die_restoring("groups");
}

uid_t FsIdentity::current_fsuid() { return query_fsuid(); }
gid_t FsIdentity::current_fsgid() { return query_fsgid(); }

}  // namespace agentbox
