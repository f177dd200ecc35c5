#include "util/run_program.hpp"

#include <fcntl.h>
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

std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  size_t nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

}  // namespace

ProgramResult run_program(const std::vector<std::string>& argv) {
  if (argv.empty()) throw Error("run_program: no program");
  const std::string program = find_program(argv[0]);
  int fds[2];
  check(::pipe2(fds, O_CLOEXEC), "pipe2");
  UniqueFd read_end(fds[0]), write_end(fds[1]);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, write_end.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, write_end.get(), 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, program.c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw sys_error("posix_spawn(" + program + ")", rc);
  write_end.reset();

  ProgramResult result;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n == -1 && errno == EINTR) continue;
    if (n <= 0) break;
    if (result.output.size() < kMaxOutput) result.output.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) == -1) {
    if (errno != EINTR) throw sys_error("waitpid(" + program + ")");
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

void run_program_checked(const std::vector<std::string>& argv) {
  ProgramResult r = run_program(argv);
  if (r.status != 0)
    throw Error(argv[0] + " failed (status " + std::to_string(r.status) + "): " + last_line(r.output));
}

}  // namespace agentbox
