#pragma once
// Runs a host program to completion (mkfs.ext4, resize2fs): posix_spawn, so it is safe from a
// multi-threaded daemon; stdin is /dev/null and its output is collected for the error message.
#include <string>
#include <vector>

namespace agentbox {

struct ProgramResult {
  int status = 0;        // exit status, or 128 + signal
  std::string output;    // stdout and stderr together, at most 64 KiB
};

// argv[0] is looked up in PATH (plus /usr/sbin and /sbin, where e2fsprogs live). Throws Error
// when the program cannot be started.
ProgramResult run_program(const std::vector<std::string>& argv);

// run_program, and Error naming the program and its last output line unless it exited 0.
void run_program_checked(const std::vector<std::string>& argv);

}  // namespace agentbox
