#include "volumes/e2fsprogs_runner.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
  thread_ = std::thread([this] { main_loop(); });
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

// Called on the thread, first: its own mount namespace (unshare gives the thread its own root
// and cwd too), private so that no later mount reaches it, without the volumes mounted now.
void E2fsprogsRunner::leave_volumes_behind() {
  try {
    check(::unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)");
    check(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), "mount(/, private)");
    if (!volumes_dir_.starts_with("/") || volumes_dir_.size() < 2) throw Error("no VOLUMES to leave: " + volumes_dir_);
    std::vector<std::string> below;
    const std::string prefix = volumes_dir_ + "/";
    for (MountInfoEntry& e : parse_mountinfo(read_file("/proc/thread-self/mountinfo", kMaxMountinfo)))
      if (e.point.starts_with(prefix)) below.push_back(std::move(e.point));
    std::sort(below.begin(), below.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    for (const std::string& point : below)
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

void E2fsprogsRunner::main_loop() {
  ::pthread_setname_np(::pthread_self(), "e2fsprogs");
  block_process_signals();  // util/thread_signals.hpp: a SIGTERM here would kill the daemon
  leave_volumes_behind();
  leave_descriptors_behind();
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
