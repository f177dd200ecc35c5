#pragma once
// e2fsprogs (mkfs.ext4, e2fsck, resize2fs) started from a thread whose mount namespace holds none
// of the account volumes. Before they touch an image they read the whole mount table and open
// every loop device named in it (ext2fs_check_if_mounted): with 3,500 volumes attached that was
// most of a mkfs.ext4 (bench/RESULTS.md, "Many users"), paid again for every new user's volume.
// The thread's namespace is a copy of the daemon's, made when it starts, holding only what the
// programs need (the root, /proc, /sys, /dev, the system's program and library directories, the
// mounts on the way to VOLUMES and to the programs): none of the volumes, nobody else's mounts.
// It is the daemon's slave, so what the daemon's namespace unmounts goes from it too and it
// keeps nothing alive; VOLUMES alone is private, so volumes mounted later never reach it. An
// image's path means the same file there as here.
// Without the namespace (unshare refused) the programs run in the daemon's, only slower. The
// thread's descriptor table is its own too, empty but for stdin, stdout and stderr, so starting a
// program does not copy (and exec then close) the daemon's thousands of descriptors.
//
// Runs on: its own thread ("e2fsprogs"), which takes none of the daemon's signals; run() blocks
// its caller until the program ends, and the program runs at the caller's CPU and I/O priority.
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/run_program.hpp"

namespace agentbox {

class E2fsprogsRunner {
 public:
  // volumes_dir: VOLUMES, whose mounts the thread's namespace leaves out. Returns once the
  // thread has its namespace and descriptor table.
  explicit E2fsprogsRunner(std::string volumes_dir);
  ~E2fsprogsRunner();  // waits for the program running, if any
  E2fsprogsRunner(const E2fsprogsRunner&) = delete;
  E2fsprogsRunner& operator=(const E2fsprogsRunner&) = delete;

  // run_program(argv) on the thread; throws what it throws.
  ProgramResult run(const std::vector<std::string>& argv);
  // run(), and Error naming the program and its last output line unless it exited 0.
  void run_checked(const std::vector<std::string>& argv);

  // The mounts in the namespace the programs see (tests: none of the volumes').
  std::string mount_table();

 private:
  struct Job {
    std::vector<std::string> argv;
    int nice = 0;    // the caller's
    int ioprio = 0;  // the caller's (ioprio_get), 0: the default
    std::promise<ProgramResult> done;
  };
  void main_loop(std::promise<void>& set_up);
  void leave_volumes_behind();
  void leave_descriptors_behind();

  const std::string volumes_dir_;
  std::mutex mu_;  // guards the fields below
  std::condition_variable wake_;
  std::deque<Job*> jobs_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace agentbox
