#pragma once
// FsIdentity: while alive, the calling thread's filesystem uid/gid are the account's and it has
// no supplementary groups, so files it creates belong to the account and every permission check
// is the account's own (the kernel also drops CAP_DAC_OVERRIDE and the other fs capabilities
// from a thread whose fsuid is not 0). The destructor restores the previous identity.
//
// Per-thread by design: setfsuid/setfsgid change only the calling thread, and the supplementary
// groups are set with the raw setgroups syscall because glibc's setgroups() changes every
// thread of the process. Hold it only inside one synchronous call on one thread (never across
// an await or a handoff to another thread), and start no thread while holding it: a new thread
// copies the credentials of the one that creates it.
#include <sys/types.h>

#include <vector>

namespace agentbox {

class FsIdentity {
 public:
  // Throws agentbox::Error when the kernel does not take the new identity (the thread is left
  // as it was). A thread whose fsuid already is uid (not 0: an ordinary user's own daemon) is
  // left as it is, groups and gid included.
  FsIdentity(uid_t uid, gid_t gid);
  ~FsIdentity();
  FsIdentity(const FsIdentity&) = delete;
  FsIdentity& operator=(const FsIdentity&) = delete;

  // The calling thread's current fsuid / fsgid.
  static uid_t current_fsuid();
  static gid_t current_fsgid();

 private:
  uid_t old_uid_;
  gid_t old_gid_;
  std::vector<gid_t> old_groups_;
  bool unchanged_ = false;  // the thread already was uid (not root): nothing switched
};

}  // namespace agentbox
