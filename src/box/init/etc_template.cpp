#include "box/init/etc_template.hpp"

#include <sched.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <unistd.h>

#include "box/contain/mounts.hpp"
#include "util/error.hpp"

namespace agentbox::etc_template {
namespace {

// Where the template's tmpfs is mounted: the directory above mounts::kEtcTemplate.
constexpr const char* kMount = "/tmp";

}  // namespace

Keeper::Keeper() {
  try {
    check(::unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)");
    // Host mounts keep arriving here (and in the boxes cloned from here); ours go nowhere.
    check(::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr), "mount(/, MS_SLAVE)");
    // Any change of an entry directly in /etc: written, replaced, renamed, removed, re-permissioned.
    watch_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!watch_) throw sys_error("inotify_init1");
    constexpr uint32_t kChanges = IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                  IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;
    if (::inotify_add_watch(watch_.get(), "/etc", kChanges) < 0) throw sys_error("inotify_add_watch(/etc)");
    build();
  } catch (const Error& e) {
    error_ = e.what();  // the daemon reports it with the first box that would have used it
    ready_ = false;
  }
}

void Keeper::build() {
  // The previous template goes with its binds (boxes made from it keep their own clones);
  // the first one lands over whatever the host has at /tmp, which boxes see again.
  if (mounted_) check(::umount2(kMount, MNT_DETACH), "umount2(/etc template)");
  mounted_ = ready_ = false;
  check(::mount("tmpfs", kMount, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m"), "mount(/etc template)");
  mounted_ = true;
  mounts::build_etc_template(mounts::kEtcTemplate);
  // Read-only for good: the files of the tmpfs itself, not only this mount of it.
  check(::mount(nullptr, kMount, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr),
        "remount(/etc template, ro)");
  ready_ = true;
  error_.clear();
}

void Keeper::refresh() {
  if (!watch_) return;
  bool changed = false;
  alignas(inotify_event) char buf[4096];
  while (::read(watch_.get(), buf, sizeof buf) > 0) changed = true;
  if (!changed) return;
  try {
    build();
  } catch (const Error& e) {
    error_ = std::string("rebuild after a change of /etc: ") + e.what();
  }
}

}  // namespace agentbox::etc_template
