#include "volumes/e2fsprogs_runner.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/log.hpp"
#include "util/mountinfo.hpp"
#include "util/thread_signals.hpp"

namespace agentbox {
namespace {

constexpr int kIoprioWhoProcess = 1;            // a thread or process, by id
constexpr size_t kMaxMountinfo = 256ull << 20;  // ~150 bytes a mount

pid_t thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

}  // namespace

E2fsprogsRunner::E2fsprogsRunner(std::string volumes_dir) : volumes_dir_(std::move(volumes_dir)) {
  // Set up before this returns: a volume mounted while the thread's namespace was being copied
  // would stay alive in the copy until taken out, and a volume unmounted meanwhile would keep
  // its filesystem (and its counts unwritten) a moment longer than its unmount said.
  std::promise<void> set_up;
  std::future<void> ready = set_up.get_future();
  thread_ = std::thread([this, &set_up] { main_loop(set_up); });
  ready.wait();
}

E2fsprogsRunner::~E2fsprogsRunner() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

ProgramResult E2fsprogsRunner::run(const std::vector<std::string>& argv) {
  Job job;
  job.argv = argv;
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(thread_id()));
  job.nice = errno == 0 ? nice : 0;
  const long ioprio = ::syscall(SYS_ioprio_get, kIoprioWhoProcess, 0);
  job.ioprio = ioprio > 0 ? static_cast<int>(ioprio) : 0;
  std::future<ProgramResult> done = job.done.get_future();
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw Error("e2fsprogs runner stopped");
    jobs_.push_back(&job);
  }
  wake_.notify_one();
  return done.get();
}

void E2fsprogsRunner::run_checked(const std::vector<std::string>& argv) {
  ProgramResult r = run(argv);
  if (r.status != 0)
    throw Error(argv[0] + " failed (status " + std::to_string(r.status) + "): " + last_output_line(r.output));
}

std::string E2fsprogsRunner::mount_table() {
  ProgramResult r = run({"cat", "/proc/self/mountinfo"});
  if (r.status != 0) throw Error("cat /proc/self/mountinfo failed: " + last_output_line(r.output));
  return r.output;
}

namespace {

// Whether `dir` is `mount_point` or below it.
bool at_or_below(const std::string& dir, const std::string& mount_point) {
  if (mount_point == "/") return true;
  return dir == mount_point || (dir.starts_with(mount_point) && dir[mount_point.size()] == '/');
}

// The mounts the programs need in their namespace: the root, the system's (/proc, /sys, /dev
// and where programs, libraries and /etc live), and those on the way to VOLUMES and to the
// programs themselves. Everything else (other daemons' and tests' mounts, the host's /tmp
// ones) goes, so that this copy keeps none of them alive.
bool needed(const std::string& point, const std::vector<std::string>& paths) {
  static const char* const kSystem[] = {"/proc",  "/sys",   "/dev",    "/usr", "/etc", "/lib",
                                        "/lib32", "/lib64", "/libx32", "/bin", "/sbin"};
  if (point == "/") return true;
  for (const char* system : kSystem)
    if (at_or_below(point, system)) return true;
  for (const std::string& path : paths)
    if (at_or_below(path, point)) return true;
  return false;
}

}  // namespace

// Called on the thread, first: its own mount namespace (unshare gives the thread its own root
// and cwd too) holding only what the programs need, VOLUMES empty and private.
void E2fsprogsRunner::leave_volumes_behind() {
  try {
    if (!volumes_dir_.starts_with("/") || volumes_dir_.size() < 2) throw Error("no VOLUMES to leave: " + volumes_dir_);
    std::vector<std::string> paths = {volumes_dir_};
    for (const char* program : {"mkfs.ext4", "e2fsck", "resize2fs"}) {
      try {
        char real[PATH_MAX];
        if (::realpath(find_program(program).c_str(), real)) paths.emplace_back(real);
      } catch (const Error&) {
        // not installed: its runs fail as they would anywhere
      }
    }
    check(::unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)");
    // Slave, not private: what the daemon's namespace unmounts goes from here too, so this copy
    // keeps nothing alive that its owner let go. VOLUMES alone is private (a mount of its own
    // here, as open_root makes it there): the volumes mounted later do not come.
    check(::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr), "mount(/, slave)");
    if (::mount(nullptr, volumes_dir_.c_str(), nullptr, MS_PRIVATE, nullptr) != 0) {
      if (errno != EINVAL) throw sys_error("mount(VOLUMES, private)");
      check(::mount(volumes_dir_.c_str(), volumes_dir_.c_str(), nullptr, MS_BIND, nullptr), "mount(VOLUMES, bind)");
      check(::mount(nullptr, volumes_dir_.c_str(), nullptr, MS_PRIVATE, nullptr), "mount(VOLUMES, private)");
    }
    std::vector<std::string> gone;
    for (MountInfoEntry& e : parse_mountinfo(read_file("/proc/thread-self/mountinfo", kMaxMountinfo)))
      if (!needed(e.point, paths)) gone.push_back(std::move(e.point));
    std::sort(gone.begin(), gone.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    for (const std::string& point : gone)
      if (::umount2(point.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
        throw sys_error("umount2(" + point + ")");
  } catch (const Error& e) {
    log::warn("volumes", "e2fsprogs will see every volume's mount (slower with many): {}", e.what());
  }
}

// Called on the thread, second: a descriptor table of its own holding none of the daemon's. A
// program started from here gets a copy of the starting thread's table, which exec then walks to
// close what is close-on-exec: with 5 descriptors a box, ~18,000 at 3,500 boxes, most of a
// mkfs.ext4's start. Nothing on this thread may use a descriptor of the daemon's from here on
// (the log's file included: nothing here logs after this).
void E2fsprogsRunner::leave_descriptors_behind() {
  if (::unshare(CLONE_FILES) != 0) {
    log::warn("volumes", "unshare(CLONE_FILES): {}; e2fsprogs will start slower with many boxes", std::strerror(errno));
    return;
  }
  ::syscall(SYS_close_range, 3, ~0U, 0);
}

void E2fsprogsRunner::main_loop(std::promise<void>& set_up) {
  ::pthread_setname_np(::pthread_self(), "e2fsprogs");
  block_process_signals();  // util/thread_signals.hpp: a SIGTERM here would kill the daemon
  leave_volumes_behind();
  leave_descriptors_behind();
  set_up.set_value();
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, nothing left
    Job* job = jobs_.front();
    jobs_.pop_front();
    lock.unlock();
    try {
      // The caller's priority: a spare's refill runs at nice 19, a new user's own volume does not.
      job->done.set_value(run_program(job->argv, -1, [job](pid_t pid) {
        if (job->nice > 0) ::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), job->nice);
        if (job->ioprio > 0) ::syscall(SYS_ioprio_set, kIoprioWhoProcess, pid, job->ioprio);
      }));
    } catch (...) {
      job->done.set_exception(std::current_exception());
    }
    lock.lock();
  }
}

}  // namespace agentbox
