// abx-probe: attempts ONE attack and reports whether the kernel let it through.
//
//   abx-probe NAME [ARGS...]
//
// It prints exactly one line on stdout and exits with
//   0  "ALLOWED: <what happened>"                      the attack worked
//   1  "BLOCKED: <ERRNO> (<operation>)" or a reason    it was refused
//   2  "ERROR: <why>"                                  bad usage, or the probe could not be set up
// (`whoami` is a helper, not an attack: "INFO: ...", exit 0.)
//
// The red-team tests run each probe inside a box, where it must print BLOCKED, and outside as a
// control, where it must print ALLOWED (in the spirit of bubblewrap's tests/try-syscall.c). It links
// no agentbox code on purpose: what it reports is the kernel's answer and nothing else.
// Every probe is bounded by a watchdog and only ever talks to addresses given on the command line.

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/tiocl.h>
#include <linux/userfaultfd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

using Args = std::span<char* const>;  // the probe's arguments, after NAME
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr unsigned kProbeTimeoutSeconds = 5;
constexpr int kMaxBombSeconds = 10;
// The outer process's own bound, in case the probe's watchdog cannot run (it normally fires first).
constexpr unsigned kBackstopSeconds = kMaxBombSeconds + kProbeTimeoutSeconds + 5;
constexpr int kNetworkWaitMs = 2000;

// ---------------------------------------------------------------- results

struct Result {
  int exit_code;
  std::string line;
};

Result allowed(const std::string& what) { return {0, "ALLOWED: " + what}; }
Result blocked(const std::string& why) { return {1, "BLOCKED: " + why}; }
Result error(const std::string& why) { return {2, "ERROR: " + why}; }

std::string errno_name(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : "errno " + std::to_string(err);
}

// "BLOCKED: EPERM (mount(tmpfs, /tmp/x))": the errno name comes first so a test can match it.
Result blocked_errno(const std::string& op, int err) { return blocked(errno_name(err) + " (" + op + ")"); }
Result error_errno(const std::string& op, int err) { return error(op + ": " + errno_name(err)); }

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "killed by " + signal_name(WTERMSIG(status));
  if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
  return "ended with status " + std::to_string(status);
}

template <typename T>
std::optional<T> parse_number(const char* text, T min, T max) {
  T value{};
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || value < min || value > max) return std::nullopt;
  return value;
}

// ---------------------------------------------------------------- resources

// Owns one descriptor (the probe links nothing from agentbox, so it has its own tiny owner).
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// A fresh empty directory under $TMPDIR (or /tmp), removed again at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/abx-probe-XXXXXX";
    if (mkdtemp(templ.data()) != nullptr) path_ = templ;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (!path_.empty()) rmdir(path_.c_str());
  }
  bool ok() const { return !path_.empty(); }
  const char* path() const { return path_.c_str(); }

 private:
  std::string path_;
};

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

int wait_child(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// ---------------------------------------------------------------- watchdog

// On expiry the watchdog kills what the process started, reports an ERROR line and exits 2.
// Only async-signal-safe calls from here to on_watchdog().
volatile sig_atomic_t g_watched_pid = 0;            // a child to kill on timeout
volatile sig_atomic_t g_watched_group = 0;          // a process group to kill and reap (fork-bomb)
volatile sig_atomic_t g_report_fd = STDOUT_FILENO;  // where this process's one line goes
char g_timeout_line[64];

// Kills a process group and reaps every descendant. The caller is a child subreaper, so orphans
// are reparented to it and ECHILD means every process it made is gone. One kill is enough: the
// kernel makes a fork that races with a signal to the group fail and restart.
void kill_group_and_reap(pid_t pgid) {
  kill(-pgid, SIGKILL);
  while (waitpid(-1, nullptr, __WALL) > 0 || errno == EINTR) {
  }
}

void on_watchdog(int) {
  if (g_watched_group > 0) kill_group_and_reap(g_watched_group);
  if (g_watched_pid > 0) kill(g_watched_pid, SIGKILL);
  write(g_report_fd, g_timeout_line, std::strlen(g_timeout_line));
  _exit(2);
}

void arm_watchdog(unsigned seconds) {
  std::snprintf(g_timeout_line, sizeof g_timeout_line, "ERROR: probe timed out after %u s\n", seconds);
  struct sigaction action {};
  action.sa_handler = on_watchdog;
  sigaction(SIGALRM, &action, nullptr);
  alarm(seconds);
}

// ---------------------------------------------------------------- running an attempt in a child

// What an attempt run in a forked child reported, and how the child ended. `result` is empty when
// the child died before reporting (e.g. SIGSYS from seccomp, SIGKILL from the OOM killer).
struct ChildEnd {
  std::optional<Result> result;
  int status = 0;
};

// For attempts that change the process itself (ptrace, namespaces) or may kill it. The child
// sends its line over a pipe and exits with its exit code.
ChildEnd run_in_child(const std::function<Result()>& attempt) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {error_errno("pipe2", errno), 0};
  Fd read_end(fds[0]);
  Fd write_end(fds[1]);
  pid_t pid = fork();
  if (pid < 0) return {error_errno("fork", errno), 0};
  if (pid == 0) {
    g_report_fd = write_end.get();
    g_watched_pid = 0;
    g_watched_group = 0;
    Result r = attempt();
    write_all(write_end.get(), r.line);
    _exit(r.exit_code);
  }
  g_watched_pid = pid;
  write_end.reset();
  std::string message = read_all(read_end.get());
  while (!message.empty() && message.back() == '\n') message.pop_back();  // the watchdog's line ends in one
  ChildEnd end;
  end.status = wait_child(pid);
  g_watched_pid = 0;
  if (!message.empty() && WIFEXITED(end.status)) end.result = Result{WEXITSTATUS(end.status), message};
  return end;
}

// The child's own report, or "BLOCKED: child killed by SIGSYS" when it died before reporting.
Result child_outcome(const ChildEnd& end) {
  if (end.result) return *end.result;
  if (WIFSIGNALED(end.status)) return blocked("child " + describe_status(end.status));
  return error("child " + describe_status(end.status) + " without reporting");
}

// ---------------------------------------------------------------- files

Result probe_read_file(Args args) {
  const std::string path = args[0];
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return blocked_errno("open(" + path + ")", errno);
  char byte;
  ssize_t n = read(fd.get(), &byte, 1);
  if (n < 0) return blocked_errno("read(" + path + ")", errno);
  return allowed("read " + std::to_string(n) + " byte(s) from " + path);
}

Result probe_list_dir(Args args) {
  const std::string path = args[0];
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), closedir);
  if (!dir) return blocked_errno("opendir(" + path + ")", errno);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = readdir(dir.get())) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  if (errno != 0) return blocked_errno("readdir(" + path + ")", errno);
  std::string shown;
  for (size_t i = 0; i < names.size() && i < 5; ++i) shown += (i == 0 ? ": " : ", ") + names[i];
  if (names.size() > 5) shown += ", ...";
  return allowed("listed " + std::to_string(names.size()) + " entries in " + path + shown);
}

Result probe_write_file(Args args) {
  const std::string path = args[0];
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return blocked_errno("open(" + path + ", O_CREAT|O_TRUNC)", errno);
  if (write(fd.get(), "x", 1) != 1) return blocked_errno("write(" + path + ")", errno);
  return allowed("wrote 1 byte to " + path);
}

// Looks for NEEDLE in every file under each PATH (directories walked without following links;
// in /proc only the top level, /proc/sys, and the process directories "self" and "1"; at most
// 1 MiB of each file, opened non-blocking). ALLOWED names the first file holding it: a secret
// the box should never see was there to be read.
struct TextSearch {
  std::string needle;
  size_t files_read = 0;
  std::optional<std::string> found;

  void file(const std::string& path) {
    // Files whose reads are endless, huge or consume something (the kernel log).
    static const std::set<std::string_view> skipped = {"kmsg",       "kcore",      "pagemap",     "mem",
                                                       "kpagecount", "kpageflags", "kpagecgroup", "clear_refs"};
    if (skipped.contains(std::string_view(path).substr(path.rfind('/') + 1))) return;
    Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!fd) return;
    std::string text;
    char buf[65536];
    for (ssize_t n; text.size() < (1u << 20) && (n = read(fd.get(), buf, sizeof buf)) > 0;)
      text.append(buf, static_cast<size_t>(n));
    ++files_read;
    if (!found && text.find(needle) != std::string::npos) found = path;
  }

  void walk(const std::string& path, int depth) {
    struct stat st {};
    if (found || lstat(path.c_str(), &st) != 0) return;
    if (S_ISREG(st.st_mode)) return file(path);
    if (!S_ISDIR(st.st_mode) || depth > 12) return;
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), closedir);
    if (!dir) return;
    std::vector<std::string> names;
    while (const dirent* entry = readdir(dir.get())) {
      const std::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    for (const std::string& name : names) {
      if (path == "/proc") {
        const bool pid_dir = std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
        if ((pid_dir && name != "1") || name == "thread-self") continue;
        if (name == "self") {  // a link: the probe's own process directory
          walk("/proc/" + std::to_string(getpid()), depth + 1);
          continue;
        }
      }
      if (path.starts_with("/proc/") && (name == "task" || name == "fd" || name == "map_files" || name == "net"))
        continue;  // per-thread copies, descriptors (links) and the network tables: nothing new
      walk(path + "/" + name, depth + 1);
    }
  }
};

// NEEDLE in hex, so that the text itself is not in the probe's own command line.
Result probe_find_text(Args args) {
  TextSearch search;
  const std::string_view hex = args[0];
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    unsigned byte = 0;
    const auto [end, ec] = std::from_chars(hex.data() + i, hex.data() + i + 2, byte, 16);
    if (ec != std::errc() || end != hex.data() + i + 2) return error("find-text: NEEDLE must be hex");
    search.needle += static_cast<char>(byte);
  }
  if (hex.size() % 2 != 0 || search.needle.size() < 8) return error("find-text: a hex needle of 8 bytes or more");
  for (size_t i = 1; i < args.size(); ++i) search.walk(args[i], 0);
  if (search.found) return allowed("found the text in " + *search.found);
  if (search.files_read == 0) return error("find-text: no file could be read");
  return blocked("not found (" + std::to_string(search.files_read) + " files read)");
}

// Reads a whole file (up to 1 MiB): ALLOWED when it holds something, BLOCKED when it reads
// empty (a mask) or cannot be read.
Result probe_read_content(Args args) {
  const std::string path = args[0];
  Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return blocked_errno("open(" + path + ")", errno);
  char buf[65536];
  size_t total = 0;
  for (ssize_t n; total < (1u << 20) && (n = read(fd.get(), buf, sizeof buf)) != 0;) {
    if (n < 0) return blocked_errno("read(" + path + ")", errno);
    total += static_cast<size_t>(n);
  }
  if (total == 0) return blocked("empty (" + path + " read 0 bytes)");
  return allowed("read " + std::to_string(total) + " bytes from " + path);
}

// ---------------------------------------------------------------- other processes

std::optional<pid_t> parse_pid(const char* text) { return parse_number<pid_t>(text, 1, 1 << 22); }

Result probe_see_pid(Args args) {
  auto pid = parse_pid(args[0]);
  if (!pid) return error("bad PID '" + std::string(args[0]) + "'");
  // EPERM from kill(pid, 0) still proves the process exists and is visible.
  int kill_errno = kill(*pid, 0) == 0 ? 0 : errno;
  struct stat st;
  const std::string proc_dir = "/proc/" + std::to_string(*pid);
  bool in_proc = stat(proc_dir.c_str(), &st) == 0;
  const std::string kill_said = kill_errno == 0 ? "ok" : errno_name(kill_errno);
  const std::string detail =
      "kill(" + std::to_string(*pid) + ", 0): " + kill_said + ", " + proc_dir + (in_proc ? " exists" : " absent");
  if (kill_errno == 0 || kill_errno == EPERM || in_proc) return allowed("pid visible (" + detail + ")");
  return blocked("pid not visible (" + detail + ")");
}

Result probe_signal_pid(Args args) {
  auto pid = parse_pid(args[0]);
  if (!pid) return error("bad PID '" + std::string(args[0]) + "'");
  const std::string op = "kill(" + std::to_string(*pid) + ", SIGCONT)";
  if (kill(*pid, SIGCONT) != 0) return blocked_errno(op, errno);
  return allowed(op + " succeeded");
}

Result probe_ptrace_pid(Args args) {
  auto pid = parse_pid(args[0]);
  if (!pid) return error("bad PID '" + std::string(args[0]) + "'");
  const std::string target = std::to_string(*pid);
  if (ptrace(PTRACE_ATTACH, *pid, nullptr, nullptr) != 0) {
    return blocked_errno("ptrace(PTRACE_ATTACH, " + target + ")", errno);
  }
  // The attach stops the tracee with SIGSTOP; detaching needs it stopped, and resumes it.
  int status;
  while (waitpid(*pid, &status, __WALL) < 0 && errno == EINTR) {
  }
  ptrace(PTRACE_DETACH, *pid, nullptr, nullptr);
  return allowed("attached to pid " + target + " and detached");
}

// In a child, so the probe itself never becomes traced by whoever started it.
Result probe_ptrace_traceme(Args) {
  return child_outcome(run_in_child([] {
    if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) return blocked_errno("ptrace(PTRACE_TRACEME)", errno);
    return allowed("ptrace(PTRACE_TRACEME) succeeded");
  }));
}

// ---------------------------------------------------------------- mounts and namespaces

Result probe_mount(Args) {
  TempDir dir;
  if (!dir.ok()) return error_errno("mkdtemp", errno);
  const std::string op = std::string("mount(tmpfs, ") + dir.path() + ")";
  if (mount("tmpfs", dir.path(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k") != 0) {
    return blocked_errno(op, errno);
  }
  if (umount2(dir.path(), MNT_DETACH) != 0) return allowed(op + " succeeded, but umount failed: " + errno_name(errno));
  return allowed(op + " and umount succeeded");
}

Result probe_umount(Args args) {
  const std::string path = args[0];
  if (umount2(path.c_str(), MNT_DETACH) != 0) return blocked_errno("umount2(" + path + ", MNT_DETACH)", errno);
  return allowed("unmounted " + path);
}

Result try_unshare(int flag, const std::string& flag_name) {
  if (unshare(flag) != 0) return blocked_errno("unshare(" + flag_name + ")", errno);
  return allowed("unshare(" + flag_name + ") succeeded");
}

Result probe_clone_newns(Args) {
  // The raw syscall, as an attacker would issue it: a seccomp filter on clone flags must catch it
  // even though libc's wrappers are not involved. No new stack: the child runs on a copy, like fork.
  long pid = syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid < 0) return blocked_errno("clone(CLONE_NEWNS|SIGCHLD)", errno);
  if (pid == 0) _exit(0);
  int status = wait_child(static_cast<pid_t>(pid));
  return allowed("clone(CLONE_NEWNS) made child " + std::to_string(pid) + ", which " + describe_status(status));
}

Result probe_setns(Args args) {
  const std::string path = args[0];
  Fd ns(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return blocked_errno("open(" + path + ")", errno);
  if (setns(ns.get(), 0) != 0) return blocked_errno("setns(" + path + ")", errno);
  return allowed("joined the namespace " + path);
}

// pivot_root(".", ".") into a tmpfs, in a child that has its own mount namespace, so nothing
// outside it changes. The first refused step is the answer.
Result probe_pivot_root(Args) {
  TempDir dir;
  if (!dir.ok()) return error_errno("mkdtemp", errno);
  const std::string new_root = dir.path();
  return child_outcome(run_in_child([&new_root] {
    if (unshare(CLONE_NEWNS) != 0) return blocked_errno("unshare(CLONE_NEWNS)", errno);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return blocked_errno("mount(/, MS_REC|MS_PRIVATE)", errno);
    }
    if (mount("tmpfs", new_root.c_str(), "tmpfs", 0, "size=64k") != 0) {
      return blocked_errno("mount(tmpfs, " + new_root + ")", errno);
    }
    if (chdir(new_root.c_str()) != 0) return error_errno("chdir(" + new_root + ")", errno);
    if (syscall(SYS_pivot_root, ".", ".") != 0) return blocked_errno("pivot_root(., .)", errno);
    umount2(".", MNT_DETACH);
    return allowed("pivot_root(., .) into a tmpfs in a new mount namespace");
  }));
}

// ---------------------------------------------------------------- kernel attack surface

Result probe_bpf(Args) {
  // r0 = 0; exit: the smallest program the verifier accepts.
  struct bpf_insn program[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
  };
  static const char license[] = "GPL";
  union bpf_attr attr {};
  attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  attr.insns = reinterpret_cast<__u64>(program);
  attr.insn_cnt = 2;
  attr.license = reinterpret_cast<__u64>(license);
  Fd prog(static_cast<int>(syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr)));
  if (!prog) return blocked_errno("bpf(BPF_PROG_LOAD, socket filter)", errno);
  return allowed("bpf(BPF_PROG_LOAD) loaded a socket filter");
}

Result probe_perf_event_open(Args) {
  // User-space-only counting: the form even an unprivileged user gets at perf_event_paranoid 2.
  struct perf_event_attr attr {};
  attr.type = PERF_TYPE_SOFTWARE;
  attr.size = sizeof attr;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  Fd event(static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC)));
  if (!event) return blocked_errno("perf_event_open(software task clock, pid 0, cpu -1)", errno);
  return allowed("perf_event_open returned a counter");
}

Result probe_keyctl(Args) {
  long key = syscall(SYS_add_key, "user", "abx-probe", "x", 1, KEY_SPEC_SESSION_KEYRING);
  if (key < 0) return blocked_errno("add_key(user, session keyring)", errno);
  syscall(SYS_keyctl, KEYCTL_UNLINK, key, KEY_SPEC_SESSION_KEYRING);  // leave the keyring as found
  return allowed("add_key put key " + std::to_string(key) + " into the session keyring");
}

Result probe_io_uring(Args) {
  struct io_uring_params params {};
  Fd ring(static_cast<int>(syscall(SYS_io_uring_setup, 1, &params)));
  if (!ring) return blocked_errno("io_uring_setup(1)", errno);
  return allowed("io_uring_setup returned a ring");
}

Result probe_userfaultfd(Args) {
  // UFFD_USER_MODE_ONLY is what an unprivileged attacker asks for; kernels before 5.11 lack it.
  long fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
  if (fd < 0 && errno == EINVAL) fd = syscall(SYS_userfaultfd, O_CLOEXEC);
  const int err = errno;
  Fd uffd(static_cast<int>(fd));
  if (!uffd) return blocked_errno("userfaultfd", err);
  return allowed("userfaultfd returned a descriptor");
}

// ---------------------------------------------------------------- terminals

using TtyAttempt = Result (*)(int fd, const std::string& tty);

// Runs `attempt` on the terminal an attacker would have: PATH if given, else stdin if it is a
// terminal, else the controlling terminal, else a fresh pty that a child makes the controlling
// terminal of a new session (TIOCSTI on one's own controlling terminal needs no capability, so
// this control works for any user).
Result on_terminal(Args args, TtyAttempt attempt) {
  if (!args.empty()) {
    Fd fd(open(args[0], O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!fd) return error_errno("open(" + std::string(args[0]) + ")", errno);
    return attempt(fd.get(), args[0]);
  }
  if (isatty(STDIN_FILENO)) return attempt(STDIN_FILENO, "stdin");
  Fd tty(open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (tty) return attempt(tty.get(), "/dev/tty");
  return child_outcome(run_in_child([attempt] {
    Fd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!master) return error_errno("posix_openpt", errno);
    if (grantpt(master.get()) != 0 || unlockpt(master.get()) != 0) return error_errno("unlockpt", errno);
    const char* slave_name = ptsname(master.get());
    if (slave_name == nullptr) return error_errno("ptsname", errno);
    const std::string name = slave_name;
    signal(SIGHUP, SIG_IGN);  // closing the master hangs up our terminal before we can report
    if (setsid() < 0) return error_errno("setsid", errno);
    Fd slave(open(name.c_str(), O_RDWR | O_CLOEXEC));  // no O_NOCTTY: it becomes our terminal
    if (!slave) return error_errno("open(" + name + ")", errno);
    return attempt(slave.get(), name);
  }));
}

Result inject_byte(int fd, const std::string& tty, unsigned long request, const std::string& request_name) {
  char byte = 'x';
  // The raw syscall passes all 64 bits of `request`; the kernel only looks at the low 32.
  if (syscall(SYS_ioctl, fd, request, &byte) != 0) {
    return blocked_errno("ioctl(" + tty + ", " + request_name + ")", errno);
  }
  tcflush(fd, TCIFLUSH);  // drop the injected byte before any real reader sees it
  return allowed(request_name + " injected a byte into " + tty);
}

Result tiocsti_attempt(int fd, const std::string& tty) { return inject_byte(fd, tty, TIOCSTI, "TIOCSTI"); }

Result tiocsti_highbit_attempt(int fd, const std::string& tty) {
  return inject_byte(fd, tty, TIOCSTI | 0xffffffff00000000UL, "TIOCSTI|0xffffffff00000000");
}

Result tioclinux_attempt(int fd, const std::string& tty) {
  char subcode = TIOCL_GETSHIFTSTATE;  // reads the keyboard shift state; changes nothing
  if (ioctl(fd, TIOCLINUX, &subcode) != 0) return blocked_errno("ioctl(" + tty + ", TIOCLINUX)", errno);
  return allowed("TIOCLINUX(TIOCL_GETSHIFTSTATE) on " + tty + " returned 0");
}

// Sets the line discipline the terminal already has (N_TTY): changes nothing when it works, but
// any other value would load rarely used kernel code (n_hdlc, slcan, ...).
Result tiocsetd_attempt(int fd, const std::string& tty) {
  int discipline = N_TTY;
  if (ioctl(fd, TIOCSETD, &discipline) != 0) return blocked_errno("ioctl(" + tty + ", TIOCSETD)", errno);
  return allowed("TIOCSETD(N_TTY) on " + tty + " returned 0");
}

Result probe_tiocsti(Args args) { return on_terminal(args, tiocsti_attempt); }
Result probe_tiocsetd(Args args) { return on_terminal(args, tiocsetd_attempt); }
Result probe_tiocsti_highbit(Args args) { return on_terminal(args, tiocsti_highbit_attempt); }
Result probe_tioclinux(Args args) { return on_terminal(args, tioclinux_attempt); }

// ---------------------------------------------------------------- network

Result try_socket(int domain, int type, int protocol, const std::string& what) {
  Fd sock(socket(domain, type | SOCK_CLOEXEC, protocol));
  if (!sock) return blocked_errno("socket(" + what + ")", errno);
  return allowed("socket(" + what + ") succeeded");
}

// HOST must be a numeric address: the probe never resolves names, so it reaches only what the
// test names on its command line.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = 0;
};

std::optional<SocketAddress> parse_address(const char* host, const char* port_text) {
  auto port = parse_number<uint16_t>(port_text, 1, 65535);
  if (!port) return std::nullopt;
  SocketAddress address;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = address.family = AF_INET;
    v4->sin_port = htons(*port);
    address.length = sizeof *v4;
  } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = address.family = AF_INET6;
    v6->sin6_port = htons(*port);
    address.length = sizeof *v6;
  } else {
    return std::nullopt;
  }
  return address;
}

Result probe_tcp_connect(Args args) {
  auto address = parse_address(args[0], args[1]);
  if (!address) return error("HOST must be a numeric address and PORT 1-65535");
  const std::string target = std::string(args[0]) + ":" + args[1];
  Fd sock(socket(address->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!sock) return blocked_errno("socket(SOCK_STREAM)", errno);
  if (connect(sock.get(), reinterpret_cast<sockaddr*>(&address->storage), address->length) != 0) {
    if (errno != EINPROGRESS) return blocked_errno("connect(" + target + ")", errno);
    pollfd waiting{.fd = sock.get(), .events = POLLOUT, .revents = 0};
    if (poll(&waiting, 1, kNetworkWaitMs) == 0) return blocked("ETIMEDOUT (connect(" + target + ") took over 2 s)");
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return blocked_errno("connect(" + target + ")", err);
  }
  return allowed("connected to " + target);
}

Result probe_udp_send(Args args) {
  auto address = parse_address(args[0], args[1]);
  if (!address) return error("HOST must be a numeric address and PORT 1-65535");
  const std::string target = std::string(args[0]) + ":" + args[1];
  Fd sock(socket(address->family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) return blocked_errno("socket(SOCK_DGRAM)", errno);
  if (connect(sock.get(), reinterpret_cast<sockaddr*>(&address->storage), address->length) != 0) {
    return blocked_errno("connect(" + target + ")", errno);
  }
  static constexpr std::string_view kPing = "abx-probe";
  if (send(sock.get(), kPing.data(), kPing.size(), 0) < 0) return blocked_errno("send(" + target + ")", errno);
  pollfd waiting{.fd = sock.get(), .events = POLLIN, .revents = 0};
  if (poll(&waiting, 1, kNetworkWaitMs) == 0) return blocked("ETIMEDOUT (no reply from " + target + " within 2 s)");
  char reply[64];
  ssize_t n = recv(sock.get(), reply, sizeof reply, MSG_DONTWAIT);
  if (n < 0) return blocked_errno("recv(" + target + ")", errno);  // ECONNREFUSED: nobody listens
  return allowed("got a " + std::to_string(n) + "-byte reply from " + target);
}

// `tcp-buffers MIB CONNS`: CONNS loopback connections whose sending ends are written to until
// the kernel takes no more, and whose receiving ends are never read (the socket buffers of both
// sides fill: host TCP memory, net.ipv4.tcp_mem). ALLOWED once MIB MiB sit queued; BLOCKED when
// writing stopped short of that (no byte taken for half a second). Either way it holds the
// connections one more second before it reports, so a test can read the box's usage meanwhile.
Result probe_tcp_buffers(Args args) {
  const auto mib = parse_number<uint64_t>(args[0], 1, 4096);
  const auto conns = parse_number<int>(args[1], 1, 1024);
  if (!mib || !conns) return error("tcp-buffers MIB CONNS: MIB 1-4096, CONNS 1-1024");
  const uint64_t goal = *mib << 20;
  struct Sockets {
    std::vector<int> fds;
    ~Sockets() {
      for (int fd : fds) close(fd);
    }
  } held;
  Fd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener) return error_errno("socket", errno);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(listener.get(), *conns) != 0 ||
      getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return error_errno("listen(127.0.0.1)", errno);
  std::vector<int> senders;
  for (int i = 0; i < *conns; ++i) {
    const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (client < 0) return error_errno("socket", errno);
    held.fds.push_back(client);
    if (connect(client, reinterpret_cast<sockaddr*>(&address), length) != 0) return error_errno("connect", errno);
    const int server = accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (server < 0) return error_errno("accept", errno);
    held.fds.push_back(server);
    fcntl(client, F_SETFL, O_NONBLOCK);
    senders.push_back(client);
  }
  static char chunk[1 << 16];
  uint64_t queued = 0;
  auto last_progress = Clock::now();
  while (queued < goal && Clock::now() - last_progress < 500ms) {
    bool moved = false;
    for (int fd : senders) {
      for (ssize_t n; queued < goal && (n = send(fd, chunk, sizeof chunk, MSG_NOSIGNAL)) > 0;) {
        queued += static_cast<uint64_t>(n);
        moved = true;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && queued < goal) return error_errno("send", errno);
    }
    if (moved) {
      last_progress = Clock::now();
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  std::this_thread::sleep_for(1s);
  const std::string amount = std::to_string(queued >> 10) + " KiB in " + std::to_string(*conns) + " connections";
  if (queued >= goal) return allowed("queued " + amount);
  return blocked("socket buffers stopped taking data at " + amount);
}

// ---------------------------------------------------------------- privileges

// `setuid-gain PATH` runs PATH (a setuid-root copy of this probe) as `PATH setuid-gain --child`,
// which prints "EUID: N" and exits 0. Gaining euid 0 through the exec is the attack.
Result probe_setuid_gain(Args args) {
  const std::string path = args[0];
  if (path == "--child") return {0, "EUID: " + std::to_string(geteuid())};
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return error_errno("pipe2", errno);
  Fd read_end(fds[0]);
  Fd write_end(fds[1]);
  pid_t pid = fork();
  if (pid < 0) return error_errno("fork", errno);
  if (pid == 0) {
    dup2(write_end.get(), STDOUT_FILENO);
    char* const child_argv[] = {const_cast<char*>(path.c_str()), const_cast<char*>("setuid-gain"),
                                const_cast<char*>("--child"), nullptr};
    execv(path.c_str(), child_argv);
    dprintf(STDOUT_FILENO, "EXEC-FAILED: %d", errno);
    _exit(127);
  }
  g_watched_pid = pid;
  write_end.reset();
  const std::string output = read_all(read_end.get());
  const int status = wait_child(pid);
  g_watched_pid = 0;
  int value = -1;
  if (std::sscanf(output.c_str(), "EXEC-FAILED: %d", &value) == 1) {
    // A missing copy is the test's mistake; any other refusal (noexec, EACCES) is the box's answer.
    if (value == ENOENT) return error_errno("execv(" + path + ")", value);
    return blocked_errno("execv(" + path + ")", value);
  }
  if (std::sscanf(output.c_str(), "EUID: %d", &value) != 1) {
    return error("child " + describe_status(status) + " with unexpected output '" + output + "'");
  }
  const std::string before = " (the probe's own euid is " + std::to_string(geteuid()) + ")";
  if (value == 0) return allowed("euid 0 after exec of " + path + before);
  return blocked("euid stayed " + std::to_string(value) + " after exec of " + path + before);
}

std::set<std::string> core_files_in(const std::string& dir) {
  std::set<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> listing(opendir(dir.c_str()), closedir);
  if (!listing) return names;
  while (const dirent* entry = readdir(listing.get())) {
    if (std::string_view(entry->d_name).starts_with("core")) names.insert(entry->d_name);
  }
  return names;
}

// A core dump can leak a process's memory (secrets) to a file; the box should forbid it through a
// hard RLIMIT_CORE of 0, which the child can then not raise.
Result probe_core_dump(Args args) {
  const std::string dir = args[0];
  const std::set<std::string> before = core_files_in(dir);
  pid_t pid = fork();
  if (pid < 0) return error_errno("fork", errno);
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(3);
    struct rlimit core;
    getrlimit(RLIMIT_CORE, &core);
    core.rlim_cur = core.rlim_max;
    setrlimit(RLIMIT_CORE, &core);
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    abort();
  }
  g_watched_pid = pid;
  const int status = wait_child(pid);
  g_watched_pid = 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) return error("the child could not chdir(" + dir + ")");
  std::string appeared;
  for (const std::string& name : core_files_in(dir)) {
    if (before.contains(name)) continue;
    appeared += " " + name;
    unlink((dir + "/" + name).c_str());  // the probe cleans up what it made
  }
  if (WCOREDUMP(status) || !appeared.empty()) {
    return allowed(std::string("child dumped core (WCOREDUMP ") + (WCOREDUMP(status) ? "set" : "unset") +
                   ", new files:" + (appeared.empty() ? " none" : appeared) + ")");
  }
  struct rlimit core;
  getrlimit(RLIMIT_CORE, &core);
  const std::string hard = core.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(core.rlim_max);
  return blocked("no core dump (child " + describe_status(status) + ", RLIMIT_CORE hard limit " + hard + ")");
}

Result probe_caps(Args) {
  std::ifstream status("/proc/self/status");
  if (!status) return error_errno("open(/proc/self/status)", errno);
  std::string shown;
  bool any = false;
  int found = 0;
  for (std::string line; std::getline(status, line);) {
    for (std::string_view key : {"CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}) {
      if (!line.starts_with(key)) continue;
      const std::string hex = line.substr(line.find_first_not_of(" \t", key.size()));
      unsigned long long value = 0;
      std::from_chars(hex.data(), hex.data() + hex.size(), value, 16);
      any = any || value != 0;
      if (found++ > 0) shown += ' ';  // appends: GCC 12 -O3 misreads "lit" + string (-Wrestrict)
      shown.append(key.substr(0, key.size() - 1)).append("=").append(hex);
    }
  }
  if (found != 4) return error("expected 4 capability sets in /proc/self/status, found " + std::to_string(found));
  if (any) return allowed("capabilities held: " + shown);
  return blocked("all capability sets empty: " + shown);
}

Result probe_no_new_privs(Args) {
  int flag = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
  if (flag < 0) return error_errno("prctl(PR_GET_NO_NEW_PRIVS)", errno);
  if (flag == 0) return allowed("no_new_privs is 0: exec can still gain privileges");
  return blocked("no_new_privs is 1");
}

// ---------------------------------------------------------------- resource exhaustion

// Counters every bomb process shares (MAP_SHARED), to know how far the bomb got.
struct BombCounters {
  std::atomic<long> slots{1};  // processes started or being forked; the leader is the first
  std::atomic<long> live{0};   // processes forked so far, the leader included
  std::atomic<long> failures{0};
  std::atomic<int> first_errno{0};
};

[[noreturn]] void idle_until_killed() {
  for (;;) pause();
}

// Every bomb process runs this: fork until the bomb holds `target` processes or the deadline
// passes; a failed fork is counted and retried after a pause, so a limit shows as failures.
[[noreturn]] void bomb_loop(BombCounters& counters, long target, Clock::time_point deadline) {
  for (;;) {
    if (Clock::now() >= deadline) idle_until_killed();
    if (counters.slots.fetch_add(1) >= target) {
      counters.slots.fetch_sub(1);
      idle_until_killed();
    }
    pid_t pid = fork();  // the child goes on in this same loop
    if (pid > 0) {
      counters.live.fetch_add(1);
    } else if (pid < 0) {
      const int err = errno;
      counters.slots.fetch_sub(1);
      if (counters.failures.fetch_add(1) == 0) counters.first_errno = err;
      usleep(10000);
    }
  }
}

// fork-bomb SECONDS [N]: the bomb runs in its own process group; the probe is a child subreaper,
// so at the end one SIGKILL to the group and a reap loop leave no process behind.
Result probe_fork_bomb(Args args) {
  auto seconds = parse_number<int>(args[0], 1, kMaxBombSeconds);
  auto wanted = args.size() > 1 ? parse_number<long>(args[1], 1, 30000) : std::optional<long>(5000);
  if (!seconds || !wanted) return error("usage: fork-bomb SECONDS(1-10) [N(1-30000), default 5000]");
  arm_watchdog(static_cast<unsigned>(*seconds) + kProbeTimeoutSeconds);

  void* shared = mmap(nullptr, sizeof(BombCounters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return error_errno("mmap", errno);
  auto* counters = new (shared) BombCounters{};
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return error_errno("prctl(PR_SET_CHILD_SUBREAPER)", errno);

  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(*seconds);
  pid_t leader = fork();
  if (leader < 0) return blocked_errno("fork", errno);
  if (leader == 0) {
    setpgid(0, 0);
    bomb_loop(*counters, *wanted + 1, deadline);
  }
  counters->live.fetch_add(1);
  setpgid(leader, leader);  // also here, so the group exists before the probe might kill it
  g_watched_group = leader;

  // Stop when the bomb is big enough, at the deadline, or once forks fail and the count has not
  // grown for 300 ms (forks still in flight at the first failure may yet succeed).
  long last_count = 0;
  Clock::time_point last_growth = Clock::now();
  while (Clock::now() < deadline && counters->live.load() <= *wanted) {
    const long count = counters->live.load();
    if (count != last_count) {
      last_count = count;
      last_growth = Clock::now();
    }
    if (counters->failures.load() > 0 && Clock::now() - last_growth > 300ms) break;
    usleep(10000);
  }
  const long live = counters->live.load();
  const long failures = counters->failures.load();
  const int first_errno = counters->first_errno.load();
  kill_group_and_reap(leader);
  g_watched_group = 0;
  munmap(shared, sizeof(BombCounters));

  if (live > *wanted) {
    return allowed(std::to_string(live) + " live processes, " + std::to_string(failures) + " failed forks");
  }
  if (failures > 0) {
    return blocked(errno_name(first_errno) + " after " + std::to_string(live) + " processes (" +
                   std::to_string(failures) + " failed forks)");
  }
  return error("only " + std::to_string(live) + " processes after " + std::to_string(*seconds) +
               " s and no failed fork");
}

Result probe_memory_bomb(Args args) {
  auto mib = parse_number<size_t>(args[0], 1, size_t{1} << 20);
  if (!mib) return error("bad MIB '" + std::string(args[0]) + "'");
  const std::string amount = std::to_string(*mib) + " MiB";
  ChildEnd end = run_in_child([&] {
    const size_t size = *mib << 20;
    void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return blocked_errno("mmap(" + amount + ")", errno);
    auto* bytes = static_cast<volatile char*>(memory);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (size_t offset = 0; offset < size; offset += page) bytes[offset] = 1;
    return allowed("a child allocated and touched " + amount);
  });
  if (!end.result && WIFSIGNALED(end.status) && WTERMSIG(end.status) == SIGKILL) {
    return blocked("child killed by SIGKILL while touching " + amount + " (out of memory)");
  }
  return child_outcome(end);
}

// ---------------------------------------------------------------- foreign architecture

// `int $0x80` enters the kernel through the i386 syscall table, where number 20 is getpid. A
// seccomp filter that checks only x86_64 numbers would let every i386 syscall through.
Result probe_int80(Args) {
#if defined(__x86_64__)
  ChildEnd end = run_in_child([] {
    signal(SIGSEGV, SIG_DFL);  // a sanitizer's handler would turn the fault into an exit code
    signal(SIGSYS, SIG_DFL);
    long ret = 20;  // __NR_getpid on i386
    asm volatile("int $0x80" : "+a"(ret) : : "r8", "r9", "r10", "r11", "memory", "cc");
    if (ret < 0 && ret >= -4095) return blocked_errno("int $0x80 getpid", static_cast<int>(-ret));
    return allowed("int $0x80 getpid returned " + std::to_string(ret) + " (pid " + std::to_string(getpid()) + ")");
  });
  // SIGSYS is seccomp's answer; SIGSEGV means the CPU refused the gate before any syscall entry
  // (no i386 entry on this kernel or hypervisor), so a filter was never consulted.
  if (!end.result && WIFSIGNALED(end.status) && WTERMSIG(end.status) == SIGSEGV) {
    return blocked("child killed by SIGSEGV (int $0x80 faulted: this kernel or hypervisor has no i386 entry)");
  }
  return child_outcome(end);
#else
  return error("int80 needs an x86_64 build");
#endif
}

// ---------------------------------------------------------------- sweeps (the seccomp allowlist)

// What one attempt, made in its own child (run_in_child) so a kill is attributed to it,
// answered: "EPERM", another errno name, "ok", or "SIGxxx" when it killed the child.
std::string attempt_in_child(const std::function<long()>& call) {
  const ChildEnd end = run_in_child([&] {
    signal(SIGSEGV, SIG_DFL);
    signal(SIGILL, SIG_DFL);
    arm_watchdog(2);  // a call that blocks is reported as a timeout, not waited for
    errno = 0;
    const long rc = call();
    return Result{0, rc == -1 ? errno_name(errno) : "ok"};
  });
  if (end.result) return end.result->exit_code == 0 ? end.result->line : "timeout";
  if (WIFSIGNALED(end.status)) return signal_name(WTERMSIG(end.status));
  return "no answer";
}

// "1,2,5" -> {1, 2, 5}; nullopt on anything else.
std::optional<std::set<long>> parse_number_list(const char* text) {
  std::set<long> numbers;
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    const auto n = parse_number<long>(item.c_str(), 0, 1 << 20);
    if (!n) return std::nullopt;
    numbers.insert(*n);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return numbers;
}

// The verdict over many attempts: BLOCKED when every one answered EPERM (the filter's answer),
// else ALLOWED naming how many got another answer, and the first of them.
Result sweep_verdict(const std::string& what, const std::vector<std::pair<std::string, std::string>>& answers) {
  std::string past;
  size_t count = 0;
  for (const auto& [attempt, answer] : answers) {
    if (answer == "EPERM") continue;
    if (++count <= 40) past += " " + attempt + "=" + answer;
  }
  if (count == 0) return blocked("EPERM (all " + std::to_string(answers.size()) + " " + what + ")");
  return allowed(std::to_string(count) + " of " + std::to_string(answers.size()) + " " + what +
                 " answered other than EPERM:" + past);
}

// Every syscall number from 0 to LAST except the listed ones, with junk arguments (-1: bad
// descriptors, bad pointers, invalid flags), so a call that got through still does nothing.
Result probe_syscall_sweep(Args args) {
  const auto last = parse_number<long>(args[0], 0, 1023);
  const auto except = parse_number_list(args[1]);
  if (!last || !except) return error("syscall-sweep LAST EXCEPT: a number and a comma-separated list");
  setsid();  // no controlling terminal: vhangup has nothing to hang up
  std::vector<std::pair<std::string, std::string>> answers;
  for (long nr = 0; nr <= *last; ++nr) {
    if (except->contains(nr)) continue;
    answers.emplace_back(std::to_string(nr),
                         attempt_in_child([nr] { return syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L); }));
  }
  return sweep_verdict("syscall numbers", answers);
}

// socket() of every family up to AF_MAX but the listed ones, in each of the four usual types;
// then the listed families with types and protocols off the list (raw IP, SCTP, UDP-Lite,
// netlink other than ROUTE). Each socket made is closed at once.
Result probe_socket_sweep(Args args) {
  const auto except = parse_number_list(args[0]);
  if (!except) return error("socket-sweep FAMILIES: a comma-separated list of families to skip");
  std::vector<std::pair<int, std::array<int, 2>>> attempts;  // family, {type, protocol}
  for (int af = 0; af < AF_MAX; ++af) {
    if (except->contains(af)) continue;
    for (int type : {SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET}) attempts.push_back({af, {type, 0}});
  }
  for (int af : {AF_INET, AF_INET6}) {
    attempts.push_back({af, {SOCK_RAW, IPPROTO_RAW}});
    attempts.push_back({af, {SOCK_STREAM, IPPROTO_SCTP}});
    attempts.push_back({af, {SOCK_SEQPACKET, IPPROTO_SCTP}});
    attempts.push_back({af, {SOCK_DGRAM, IPPROTO_UDPLITE}});
    attempts.push_back({af, {SOCK_PACKET, 0}});
  }
  attempts.push_back({AF_UNIX, {SOCK_STREAM, 1}});
  for (int protocol = 1; protocol < 32; ++protocol) attempts.push_back({AF_NETLINK, {SOCK_RAW, protocol}});
  std::vector<std::pair<std::string, std::string>> answers;
  for (const auto& attempt : attempts) {
    const int af = attempt.first, type = attempt.second[0], protocol = attempt.second[1];
    answers.emplace_back(
        "socket(" + std::to_string(af) + "," + std::to_string(type) + "," + std::to_string(protocol) + ")",
        attempt_in_child([af, type, protocol] {
          const int fd = socket(af, type | SOCK_CLOEXEC, protocol);
          if (fd >= 0) close(fd);
          return fd < 0 ? -1L : 0L;
        }));
  }
  return sweep_verdict("sockets", answers);
}

// ---------------------------------------------------------------- helper

Result probe_whoami(Args) {
  std::string line = "uid=" + std::to_string(getuid()) + " euid=" + std::to_string(geteuid()) +
                     " gid=" + std::to_string(getgid()) + " egid=" + std::to_string(getegid()) + " groups=";
  std::vector<gid_t> groups(static_cast<size_t>(std::max(getgroups(0, nullptr), 0)));
  int count = getgroups(static_cast<int>(groups.size()), groups.data());
  for (int i = 0; i < count; ++i) {
    if (i > 0) line += ',';
    line += std::to_string(groups[static_cast<size_t>(i)]);
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return {0, "INFO: " + line + " hostname=" + host};
}

// ---------------------------------------------------------------- the table

struct Probe {
  std::string_view name;
  std::string_view usage;  // the arguments after NAME
  size_t min_args;
  size_t max_args;
  Result (*run)(Args);
};

const Probe kProbes[] = {
    {"read-file", "PATH", 1, 1, probe_read_file},
    {"list-dir", "PATH", 1, 1, probe_list_dir},
    {"read-content", "PATH", 1, 1, probe_read_content},
    {"find-text", "NEEDLE PATH...", 2, 8, probe_find_text},
    {"write-file", "PATH", 1, 1, probe_write_file},
    {"see-pid", "PID", 1, 1, probe_see_pid},
    {"signal-pid", "PID", 1, 1, probe_signal_pid},
    {"ptrace-pid", "PID", 1, 1, probe_ptrace_pid},
    {"ptrace-traceme", "", 0, 0, probe_ptrace_traceme},
    {"mount", "", 0, 0, probe_mount},
    {"umount", "PATH", 1, 1, probe_umount},
    {"unshare-user", "", 0, 0, [](Args) { return try_unshare(CLONE_NEWUSER, "CLONE_NEWUSER"); }},
    {"unshare-mount", "", 0, 0, [](Args) { return try_unshare(CLONE_NEWNS, "CLONE_NEWNS"); }},
    {"unshare-net", "", 0, 0, [](Args) { return try_unshare(CLONE_NEWNET, "CLONE_NEWNET"); }},
    {"clone-newns", "", 0, 0, probe_clone_newns},
    {"setns", "NSFILE", 1, 1, probe_setns},
    {"pivot-root", "", 0, 0, probe_pivot_root},
    {"bpf", "", 0, 0, probe_bpf},
    {"perf-event-open", "", 0, 0, probe_perf_event_open},
    {"keyctl", "", 0, 0, probe_keyctl},
    {"io-uring", "", 0, 0, probe_io_uring},
    {"userfaultfd", "", 0, 0, probe_userfaultfd},
    {"tiocsti", "[TTY]", 0, 1, probe_tiocsti},
    {"tiocsti-highbit", "[TTY]", 0, 1, probe_tiocsti_highbit},
    {"tioclinux", "[TTY]", 0, 1, probe_tioclinux},
    {"tiocsetd", "[TTY]", 0, 1, probe_tiocsetd},
    {"raw-socket", "", 0, 0,
     [](Args) { return try_socket(AF_INET, SOCK_RAW, IPPROTO_ICMP, "AF_INET, SOCK_RAW, ICMP"); }},
    {"packet-socket", "", 0, 0, [](Args) { return try_socket(AF_PACKET, SOCK_RAW, 0, "AF_PACKET, SOCK_RAW"); }},
    {"tcp-connect", "HOST PORT", 2, 2, probe_tcp_connect},
    {"udp-send", "HOST PORT", 2, 2, probe_udp_send},
    {"tcp-buffers", "MIB CONNS", 2, 2, probe_tcp_buffers},
    {"setuid-gain", "SETUID_COPY_OF_PROBE", 1, 1, probe_setuid_gain},
    {"core-dump", "DIR", 1, 1, probe_core_dump},
    {"fork-bomb", "SECONDS [N]", 1, 2, probe_fork_bomb},
    {"memory-bomb", "MIB", 1, 1, probe_memory_bomb},
    {"int80", "", 0, 0, probe_int80},
    {"caps", "", 0, 0, probe_caps},
    {"no-new-privs", "", 0, 0, probe_no_new_privs},
    {"syscall-sweep", "LAST EXCEPT", 2, 2, probe_syscall_sweep},
    {"socket-sweep", "FAMILIES", 1, 1, probe_socket_sweep},
    {"whoami", "", 0, 0, probe_whoami},
};

Result usage_error(const std::string& why) {
  std::fprintf(stderr, "usage: abx-probe NAME [ARGS...]\nprobes:\n");
  for (const Probe& probe : kProbes) {
    std::fprintf(stderr, "  %.*s %.*s\n", static_cast<int>(probe.name.size()), probe.name.data(),
                 static_cast<int>(probe.usage.size()), probe.usage.data());
  }
  return error(why);
}

Result run_probe(int argc, char** argv) {
  if (argc < 2) return usage_error("usage: abx-probe NAME [ARGS...]");
  const std::string_view name = argv[1];
  const Args args(argv + 2, static_cast<size_t>(argc - 2));
  const auto probe = std::ranges::find(kProbes, name, &Probe::name);
  if (probe == std::end(kProbes)) return usage_error("unknown probe '" + std::string(name) + "'");
  if (args.size() < probe->min_args || args.size() > probe->max_args) {
    return error("usage: abx-probe " + std::string(probe->name) + " " + std::string(probe->usage));
  }
  // The probe runs in a child, so that a seccomp filter that kills the process still yields a
  // line: SIGSYS is the filter's answer, any other death is not a verdict.
  arm_watchdog(kBackstopSeconds);
  ChildEnd end = run_in_child([&] {
    arm_watchdog(kProbeTimeoutSeconds);
    try {
      return probe->run(args);
    } catch (const std::exception& e) {
      return error(std::string("exception: ") + e.what());
    }
  });
  if (end.result) return *end.result;
  if (WIFSIGNALED(end.status) && WTERMSIG(end.status) == SIGSYS) return blocked("probe killed by SIGSYS (seccomp)");
  return error("probe process " + describe_status(end.status) + " without reporting");
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGCHLD, SIG_DFL);  // an inherited SIG_IGN would make every waitpid fail with ECHILD
  Result result = run_probe(argc, argv);
  alarm(0);
  std::ranges::replace(result.line, '\n', ' ');  // exactly one line, whatever a name contained
  write_all(STDOUT_FILENO, result.line + "\n");
  return result.exit_code;
}
