// proc_mask_bench: what the /proc masks add to a box start (issue 17). In a private mount
// namespace, N times: mount a fresh proc (as a box's init does), then mask it with the very
// function init calls (mounts::mask_proc), then detach it. Prints the medians of the proc mount
// and of the masks, in microseconds; bench/proc_mask_bench.sh sets the masks against a whole
// box start measured by box_bench in the same run. Must run as root.
//   proc_mask_bench [N]
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "box/contain/mounts.hpp"
#include "util/error.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 500;
  try {
    agentbox::check(::unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)");
    agentbox::check(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), "mount(/, private)");
    char dir_template[] = "/tmp/agentbox-proc-mask-XXXXXX";
    const char* dir = ::mkdtemp(dir_template);
    if (!dir) throw agentbox::sys_error("mkdtemp");
    char empty_template[] = "/tmp/agentbox-proc-empty-XXXXXX";
    const char* empty = ::mkdtemp(empty_template);
    if (!empty) throw agentbox::sys_error("mkdtemp");
    std::vector<double> mount_us, mask_us;
    for (int i = 0; i < n; ++i) {
      auto t0 = Clock::now();
      agentbox::check(::mount("proc", dir, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr), "mount(proc)");
      mount_us.push_back(us_since(t0));
      t0 = Clock::now();
      agentbox::mounts::mask_proc(dir, "/dev/null", empty);
      mask_us.push_back(us_since(t0));
      agentbox::check(::umount2(dir, MNT_DETACH), "umount2(proc)");
    }
    ::rmdir(dir);
    ::rmdir(empty);
    std::printf("proc mount median %.1f us\nproc masks median %.1f us\n", median(mount_us), median(mask_us));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "proc_mask_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
