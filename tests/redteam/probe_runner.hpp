#pragma once
// What every red-team test needs: run abx-probe inside a box (`agentbox run`) or outside as a
// control (as root, or as an unprivileged uid, in a cgroup, with RLIMIT_CORE raised), read its
// one-line verdict, and assert on it. Plus the owners of what tests make: temp dirs, background
// processes. Every process started here is bounded in time and killed by pid when its owner ends.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::redteam {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Argv = std::vector<std::string>;

inline std::string agentbox_path() { return AGENTBOX_BUILD_DIR "/agentbox"; }
inline std::string probe_path() { return AGENTBOX_BUILD_DIR "/tests/abx-probe"; }
inline std::string probe_dir() { return AGENTBOX_BUILD_DIR "/tests"; }
// Where boxes see the probe's directory (bound read-only).
constexpr const char* kProbeInBox = "/probe/abx-probe";
// The box user's home as the box sees it (`agentbox run` as root names the user "agent").
constexpr const char* kBoxHome = "/home/agent";
// The uid `agentbox run` gives its box when started by root (slot 0 of the server's range).
constexpr uid_t kBoxUid = 1000000;
// Unprivileged controls run as nobody: the question is what any user may do outside a box.
constexpr uid_t kNobody = 65534;

// ---------------------------------------------------------------- running processes

struct RunOptions {
  std::optional<uid_t> uid;          // setgroups({})/setresgid/setresuid to this before exec
  std::optional<rlim_t> core_limit;  // RLIMIT_CORE soft and hard
  std::string cgroup_procs;          // the child enters this cgroup (cgroup.procs) before exec
  std::chrono::milliseconds timeout = 30s;
};

struct RunResult {
  int exit_code = -1;  // the exit status, or 128+N when killed by signal N
  bool timed_out = false;
  std::string out;
  std::string err;
  std::string describe() const {
    return "exit " + std::to_string(exit_code) + (timed_out ? " (timed out)" : "") + ", stdout: '" + out +
           "', stderr: '" + err + "'";
  }
};

namespace detail {

inline std::vector<char*> c_argv(const Argv& argv) {
  std::vector<char*> out;
  for (const std::string& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

// In the forked child: only async-signal-safe calls until exec (the net test has a thread).
[[noreturn]] inline void exec_child(const std::vector<char*>& argv, const RunOptions& o, int in, int out, int err) {
  ::setpgid(0, 0);  // its own group, so a timeout kills everything it started
  if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(120);
  if (!o.cgroup_procs.empty()) {
    const int fd = ::open(o.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(121);  // "0": the writing process itself
    ::close(fd);
  }
  if (o.core_limit) {
    const rlimit rl{*o.core_limit, *o.core_limit};
    if (::setrlimit(RLIMIT_CORE, &rl) != 0) ::_exit(122);
  }
  if (o.uid) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(*o.uid, *o.uid, *o.uid) != 0 ||
        ::setresuid(*o.uid, *o.uid, *o.uid) != 0)
      ::_exit(123);
  }
  ::signal(SIGPIPE, SIG_DFL);
  ::execvp(argv[0], argv.data());
  ::_exit(127);
}

inline pid_t spawn(const Argv& argv, const RunOptions& o, int in, int out, int err) {
  const std::vector<char*> args = c_argv(argv);
  const pid_t pid = ::fork();
  if (pid < 0) throw sys_error("fork");
  if (pid == 0) exec_child(args, o, in, out, err);
  ::setpgid(pid, pid);  // also here: the group exists before we might signal it
  return pid;
}

inline UniqueFd open_null() {
  UniqueFd fd(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!fd) throw sys_error("open(/dev/null)");
  return fd;
}

inline int status_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace detail

// Runs argv to completion with stdin from /dev/null (so `agentbox run` uses pipes, not a pty)
// and stdout/stderr captured. On timeout the process group is killed and reaped.
inline RunResult run(const Argv& argv, const RunOptions& o = {}) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw sys_error("pipe2");
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw sys_error("pipe2");
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);
  UniqueFd null = detail::open_null();
  const pid_t pid = detail::spawn(argv, o, null.get(), out_w.get(), err_w.get());
  out_w.reset();
  err_w.reset();

  RunResult r;
  const auto deadline = Clock::now() + o.timeout;
  std::string* sinks[2] = {&r.out, &r.err};
  UniqueFd* sources[2] = {&out_r, &err_r};
  while (out_r || err_r) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= 0ms) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd p[2] = {{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) throw sys_error("poll");
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(sources[i]->get(), buf, sizeof buf);
      if (n > 0)
        sinks[i]->append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR)
        sources[i]->reset();
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = detail::status_code(status);
  return r;
}

// A process that runs while the test does (a sleeping target, a box holding a sleep, a bomb
// the test watches). Its stdout is kept for collect() when asked, else it goes to /dev/null
// like its stderr. The destructor asks it to stop (SIGTERM to its group: `agentbox run`
// forwards it and tears the box down), then kills the group after a grace period, and reaps it.
class Background {
 public:
  enum class Output { discard, keep };

  explicit Background(const Argv& argv, Output output = Output::discard, const RunOptions& o = {}) {
    UniqueFd null = detail::open_null();
    UniqueFd out_w;
    if (output == Output::keep) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) throw sys_error("pipe2");
      out_.reset(fds[0]);
      out_w.reset(fds[1]);
    }
    pid_ = detail::spawn(argv, o, null.get(), out_w ? out_w.get() : null.get(), null.get());
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  ~Background() { stop(); }

  pid_t pid() const { return pid_; }

  // True while it has not exited (it is our child, so WNOHANG tells).
  bool running() {
    if (status_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
    return !status_;
  }

  // Waits for it to exit on its own; the raw wait status, or nullopt on timeout.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (running() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
    return status_;
  }

  // Output::keep: waits up to `timeout` for the exit, stopping it when late, and returns its
  // exit code and stdout (one probe line fits the pipe, so it never blocks on us meanwhile).
  RunResult collect(std::chrono::milliseconds timeout) {
    RunResult r;
    r.timed_out = !wait_for(timeout);
    stop();
    r.exit_code = detail::status_code(*status_);
    if (out_) {
      ::fcntl(out_.get(), F_SETFL, O_NONBLOCK);
      char buf[4096];
      ssize_t n;
      while ((n = ::read(out_.get(), buf, sizeof buf)) > 0) r.out.append(buf, static_cast<size_t>(n));
    }
    return r;
  }

  void stop() {
    if (!running()) return;
    ::kill(-pid_, SIGTERM);
    if (wait_for(10s)) return;  // a SIGKILLed agentbox would leave its cgroup behind
    ::kill(-pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    status_ = status;
  }

 private:
  pid_t pid_ = -1;
  UniqueFd out_;
  std::optional<int> status_;
};

// The direct children of a host pid (from /proc/*/stat, which every kernel has).
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> kids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    UniqueFd fd(::open(("/proc/" + name + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) continue;  // it just exited
    char buf[512];
    const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
    if (n <= 0) continue;
    const std::string stat(buf, static_cast<size_t>(n));
    const size_t close = stat.rfind(')');  // the name in parentheses may hold anything
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    if (std::stol(stat.substr(close + 4)) == parent) kids.push_back(std::stoi(name));
  }
  return kids;
}

// The host pid of the first process found `depth` generations below `root`, waiting for it to
// appear (a box's command is agentbox → agentbox-init → command: depth 2).
inline std::optional<pid_t> descendant_of(pid_t root, int depth, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = Clock::now() + timeout;
  do {
    std::vector<pid_t> level = {root};
    for (int d = 0; d < depth && !level.empty(); ++d) {
      std::vector<pid_t> next;
      for (pid_t p : level)
        for (pid_t c : children_of(p)) next.push_back(c);
      level = std::move(next);
    }
    if (!level.empty()) return level.front();
    std::this_thread::sleep_for(10ms);
  } while (Clock::now() < deadline);
  return std::nullopt;
}

// ---------------------------------------------------------------- files

// A fresh directory under /tmp, removed with everything in it (boxes' files too: we are root).
class TempDir {
 public:
  explicit TempDir(std::string_view tag = "dir") {
    std::string templ = "/tmp/abx-rt-" + std::string(tag) + "-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) throw sys_error("mkdtemp(" + templ + ")");
    path_ = templ;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// ---------------------------------------------------------------- probe verdicts

// One probe run: its line ("ALLOWED: ...", "BLOCKED: EPERM (...)", "ERROR: ...") and exit code.
struct ProbeResult {
  RunResult run;
  std::string line;   // the first line of stdout, without the newline
  std::string where;  // "inside a box" / "outside as root" ..., for failure messages
};

inline ProbeResult to_probe_result(RunResult r, std::string where) {
  ProbeResult p{std::move(r), {}, std::move(where)};
  p.line = p.run.out.substr(0, p.run.out.find('\n'));
  return p;
}

inline ::testing::AssertionResult fail_with(const ProbeResult& p, std::string_view wanted) {
  return ::testing::AssertionFailure() << "wanted " << wanted << " " << p.where << ", got: " << p.run.describe();
}

// ALLOWED with exit 0: the control proves the probe can succeed.
inline ::testing::AssertionResult Allowed(const ProbeResult& p) {
  if (p.run.exit_code == 0 && p.line.starts_with("ALLOWED: ")) return ::testing::AssertionSuccess();
  return fail_with(p, "ALLOWED");
}

// BLOCKED with exit 1, and when `reason` is given, the line says it right after "BLOCKED: "
// (an errno name such as "EPERM", or the start of a reason such as "probe killed by SIGSYS").
inline ::testing::AssertionResult Blocked(const ProbeResult& p, std::string_view reason = {}) {
  const std::string head = "BLOCKED: " + std::string(reason);
  if (p.run.exit_code == 1 && p.line.starts_with(head)) {
    // The reason must end at a word boundary: "EPERM" must not match "EPERMX".
    const char next = p.line.size() > head.size() ? p.line[head.size()] : ' ';
    if (reason.empty() || next == ' ' || next == ':' || next == ',') return ::testing::AssertionSuccess();
  }
  return fail_with(p, reason.empty() ? std::string("BLOCKED") : "BLOCKED with " + std::string(reason));
}

// BLOCKED with any one of several errno names (e.g. EROFS from the mount or EACCES from Landlock).
inline ::testing::AssertionResult BlockedWithAnyOf(const ProbeResult& p,
                                                   std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    if (Blocked(p, n)) return ::testing::AssertionSuccess();
  std::string wanted = "BLOCKED with one of";
  for (std::string_view n : names) wanted += " " + std::string(n);
  return fail_with(p, wanted);
}

// ---------------------------------------------------------------- outside: controls

inline ProbeResult probe_outside(const Argv& args, const RunOptions& o = {}) {
  Argv argv = {probe_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string where = o.uid ? "outside as uid " + std::to_string(*o.uid) : "outside as root";
  return to_probe_result(run(argv, o), where);
}

// ---------------------------------------------------------------- inside: boxes

// `agentbox run --no-profile` with the probe's directory bound read-only at /probe.
class BoxRun {
 public:
  explicit BoxRun(std::string home) : home_(std::move(home)) {}

  BoxRun& ro_bind(const std::string& src, const std::string& dst) { return opt("--ro-bind", src + ":" + dst); }
  BoxRun& bind(const std::string& src, const std::string& dst) { return opt("--bind", src + ":" + dst); }
  BoxRun& memory(const std::string& size) { return opt("--memory", size); }
  BoxRun& pids(int n) { return opt("--pids", std::to_string(n)); }
  BoxRun& tcp_memory(const std::string& size) { return opt("--tcp-memory", size); }

  const std::string& home() const { return home_; }

  // The whole `agentbox run ... -- command` line.
  Argv argv(const Argv& command) const {
    Argv a = {agentbox_path(), "run", "--no-profile", "--ro-bind", probe_dir() + ":/probe"};
#ifdef AGENTBOX_SANITIZE
    // LeakSanitizer needs ptrace at exit, which the box's seccomp filter refuses: its fatal
    // error would replace the probe's exit code.
    a.insert(a.end(), {"--env", "ASAN_OPTIONS=detect_leaks=0"});
#endif
    a.insert(a.end(), opts_.begin(), opts_.end());
    a.insert(a.end(), {"--home", home_, "--"});
    a.insert(a.end(), command.begin(), command.end());
    return a;
  }

  RunResult command(const Argv& command, std::chrono::milliseconds timeout = 30s) const {
    return run(argv(command), RunOptions{.timeout = timeout});
  }

  ProbeResult probe(const Argv& args, std::chrono::milliseconds timeout = 30s) const {
    Argv cmd = {kProbeInBox};
    cmd.insert(cmd.end(), args.begin(), args.end());
    return to_probe_result(command(cmd, timeout), "inside a box");
  }

 private:
  BoxRun& opt(const char* name, const std::string& value) {
    opts_.push_back(name);
    opts_.push_back(value);
    return *this;
  }

  std::string home_;
  Argv opts_;
};

// A temp dir holding a box's home ("<tmp>/home", made by agentbox itself: 0700, box-owned).
struct BoxHome {
  TempDir dir{"home"};
  std::string path = dir / "home";
  BoxRun box() const { return BoxRun(path); }
};

}  // namespace agentbox::redteam
