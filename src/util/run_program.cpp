#include "util/run_program.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

extern char** environ;

namespace agentbox {
namespace {

constexpr size_t kMaxOutput = 64 << 10;

std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  size_t nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

}  // namespace

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = ::getenv("PATH");
  std::string dirs = std::string(path ? path : "/usr/bin:/bin") + ":/usr/sbin:/sbin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  throw Error(name + ": not found (is it installed?)", ENOENT);
}

pid_t spawn_program(const std::vector<std::string>& argv, int in, int out, int err) {
  if (argv.empty()) throw Error("run_program: no program");
  const std::string program = find_program(argv[0]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // dup2 clears close-on-exec on the copy: the daemon's descriptors stay CLOEXEC.
  const int fds[3] = {in, out, err};
  for (int target = 0; target < 3; ++target) {
    if (fds[target] >= 0)
      posix_spawn_file_actions_adddup2(&fa, fds[target], target);
    else
      posix_spawn_file_actions_addopen(&fa, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The daemon ignores SIGPIPE (serve_main.cpp), and an ignored signal stays ignored across
  // exec: the program gets the default back, so a tar whose reader left ends as it would anywhere.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, program.c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw sys_error("posix_spawn(" + program + ")", rc);
  return pid;
}

int wait_program(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) == -1) {
    if (errno != EINTR) throw sys_error("waitpid");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ProgramResult run_program(const std::vector<std::string>& argv, int stdin_fd,
                          const std::function<void(pid_t)>& started) {
  int fds[2];
  check(::pipe2(fds, O_CLOEXEC), "pipe2");
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  const pid_t pid = spawn_program(argv, stdin_fd, write_end.get(), write_end.get());
  write_end.reset();
  if (started) started(pid);

  ProgramResult result;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n == -1 && errno == EINTR) continue;
    if (n <= 0) break;
    if (result.output.size() < kMaxOutput) result.output.append(buf, static_cast<size_t>(n));
  }
  result.status = wait_program(pid);
  return result;
}

std::string last_output_line(std::string_view text) { return last_line(text); }

void run_program_checked(const std::vector<std::string>& argv) {
  ProgramResult r = run_program(argv);
  if (r.status != 0) throw Error(argv[0] + " failed (status " + std::to_string(r.status) + "): " + last_line(r.output));
}

}  // namespace agentbox
