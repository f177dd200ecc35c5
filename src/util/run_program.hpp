#pragma once
// Runs a host program to completion (mkfs.ext4, resize2fs, tar): posix_spawn, so it is safe from
// a multi-threaded daemon; stdin is /dev/null (or a given descriptor) and its output is collected
// for the error message.
#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox {

struct ProgramResult {
  int status = 0;      // exit status, or 128 + signal
  std::string output;  // stdout and stderr together, at most 64 KiB
};

// argv[0] is looked up in PATH (plus /usr/sbin and /sbin, where e2fsprogs live). Throws Error
// when the program cannot be started. `started`, when given, is called with its pid once it runs.
ProgramResult run_program(const std::vector<std::string>& argv, int stdin_fd = -1,
                          const std::function<void(pid_t)>& started = {});

// Where run_program finds argv[0]: PATH, then /usr/sbin and /sbin; a name with a slash as it is.
// Throws Error (ENOENT) when it is nowhere.
std::string find_program(const std::string& name);

// The parts of run_program for a program whose output is a stream (tar --create): starts argv
// with in, out and err as its stdin, stdout and stderr (-1: /dev/null) and returns its pid...
pid_t spawn_program(const std::vector<std::string>& argv, int in, int out, int err);
// ...which wait_program waits for: its exit status, or 128 + signal.
int wait_program(pid_t pid);
// The last line of a program's output: what an error message quotes.
std::string last_output_line(std::string_view output);

// run_program, and Error naming the program and its last output line unless it exited 0.
void run_program_checked(const std::vector<std::string>& argv);

}  // namespace agentbox
