#include "box/init/init_loop.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <variant>

#include "box/contain/contain.hpp"
#include "box/init/box_processes.hpp"
#include "box/messages.hpp"
#include "util/error.hpp"
#include "util/no_sanitize.hpp"

namespace agentbox::init {
namespace {

// Moves init (one thread) into the box's v1 cgroup through each hierarchy's `tasks` file, the
// daemon's descriptors: "0" is the writer itself, which the kernel moves without the
// threadgroup lock an attach by pid takes. The fds close here: no box process inherits them.
void join_cgroup_self(std::vector<UniqueFd>& tasks_files) {
  if (tasks_files.empty()) throw Error("no cgroup files came with the word to join the box's cgroup");
  for (UniqueFd& fd : tasks_files) {
    check(::write(fd.get(), "0", 1), "write(tasks, 0)");
    fd.reset();
  }
}

// What a spawned child tells init through its CLOEXEC pipe when it could not exec.
struct ChildFailure {
  enum Stage : int { tty = 0, cwd = 1, exec = 2 } stage;
  int err;
};

class Init {
 public:
  Init(int control, int events, std::optional<FirstMessage> first)
      : control_(control), events_(events), first_(std::move(first)) {}

  int run() {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    check(::sigprocmask(SIG_BLOCK, &chld, nullptr), "sigprocmask");
    sigfd_.reset(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!sigfd_) throw sys_error("signalfd");

    if (!start()) return 1;
    return serve();
  }

 private:
  bool start() {
    try {
      FirstMessage first = take_first();
      const protocol::StartBox& m = first.start;
      spec_ = m.spec;
      // The descriptors that come with the start, in this order: the netns to join, the /etc tree.
      size_t next_fd = 0;
      const auto take_fd = [&](bool present) {
        return present && next_fd < first.fds.size() ? first.fds[next_fd++].get() : -1;
      };
      const int netns_fd = take_fd(m.has_netns);
      mounts::EtcFrom etc;
      etc.source = m.etc;
      etc.template_mounted = m.etc_template_mounted;
      etc.tree_fd = take_fd(m.etc == EtcSource::parent_tree);
      etc.tree_dirs = m.etc_tree_dirs;
      ContainResult r = contain(spec_, netns_fd, m.legacy_mounts, etc, [&] {
        if (!m.await_cgroup) return;
        protocol::Message joined;
        if (protocol::recv(control_, joined) != protocol::RecvStatus::message)
          throw Error("the daemon did not confirm the cgroup");
        if (protocol::decode_as<protocol::CgroupJoined>(joined.body).join_self) join_cgroup_self(joined.fds);
      });
      first.fds.clear();  // the netns and the /etc tree are no longer needed once joined / attached
      // Test hook: a box that never answers its start (the daemon must time it out alone).
      if (m.hold_before_ready)
        for (;;) ::pause();
      protocol::send_message(control_, protocol::Ready{r.landlock_abi});
      return true;
    } catch (const std::exception& e) {
      protocol::send_message(control_, protocol::StartFailed{e.what()});
      return false;
    }
  }

  FirstMessage take_first() {
    if (first_) {
      FirstMessage f = std::move(*first_);
      first_.reset();
      return f;
    }
    protocol::Message m;
    if (protocol::recv(control_, m) != protocol::RecvStatus::message) throw Error("init: no start message");
    return FirstMessage{protocol::decode_as<protocol::StartBox>(m.body), std::move(m.fds)};
  }

  int serve() {
    for (;;) {
      pollfd p[2] = {{control_, POLLIN, 0}, {sigfd_.get(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return 1;
      }
      if (p[1].revents & POLLIN) reap();
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        protocol::Message m;
        if (protocol::recv(control_, m) != protocol::RecvStatus::message) return 0;  // daemon gone
        handle(m);
      }
    }
  }

  void handle(protocol::Message& m) {
    uint64_t id = 0;
    try {
      auto request = protocol::decode<protocol::InitRequest>(m.body);
      std::visit(
          [&](auto& r) {
            using R = std::decay_t<decltype(r)>;
            if constexpr (!std::is_same_v<R, protocol::CgroupJoined>) id = r.id;
          },
          request);
      if (auto* spawn_req = std::get_if<protocol::Spawn>(&request)) return spawn(*spawn_req, m.fds);
      if (auto* sig = std::get_if<protocol::Signal>(&request)) return signal(*sig);
      if (auto* count = std::get_if<protocol::CountProcesses>(&request))
        return protocol::send_message(control_, protocol::ProcessCount{count->id, count_processes()});
      if (auto* ports = std::get_if<protocol::ListPorts>(&request))
        return protocol::send_message(control_, protocol::Ports{ports->id, listening_ports()});
      throw Error("init: " + protocol::type_of(m.body) + " is not a request after the start");
    } catch (const std::exception& e) {
      // The id, even of a request that did not decode, so the daemon can tell which failed.
      if (id == 0 && m.body.is_object() && m.body.contains("id") && m.body["id"].is_number_unsigned())
        id = m.body["id"].get<uint64_t>();
      protocol::send_message(control_, protocol::Refused{id, e.what()});
    }
  }

  void spawn(const protocol::Spawn& m, std::vector<UniqueFd>& stdio) {
    const uint64_t id = m.id;
    const SpawnRequest& req = m.req;
    if (req.argv.empty()) throw Error("spawn: empty argv");
    if (!req.tty && stdio.size() != 3) throw Error("spawn: pipes mode needs 3 descriptors");
    if (children_by_spawn_.count(id)) throw Error("spawn: id " + std::to_string(id) + " is in use");

    UniqueFd master;
    std::string slave_path;
    if (req.tty) {
      master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
      if (!master && errno == ENOSPC) return refuse_without_pty(id);
      if (!master) throw sys_error("posix_openpt");
      check(::unlockpt(master.get()), "unlockpt");
      char name[128];
      if (::ptsname_r(master.get(), name, sizeof name) != 0) throw sys_error("ptsname_r");
      slave_path = name;
      winsize ws{req.rows, req.cols, 0, 0};
      check(::ioctl(master.get(), TIOCSWINSZ, &ws), "ioctl(TIOCSWINSZ)");
    }

    // Everything the child needs is built before fork.
    const std::string cwd = req.cwd.empty() ? spec_.home_target : req.cwd;
    const std::string file = resolve_command(req.argv[0], req.env, cwd);
    const bool has_fallback = !req.shell_fallback.empty();
    const std::vector<std::string> env = has_fallback ? env_as_shell_execs(req.env, file) : req.env;
    std::vector<char*> argv = c_strings(req.argv), envp = c_strings(env);
    // A file without #! is run by /bin/sh, as execvp does (with a fallback, by the shell).
    std::vector<char*> sh_argv = {const_cast<char*>("sh"), const_cast<char*>(file.c_str())};
    sh_argv.insert(sh_argv.end(), argv.begin() + 1, argv.end());
    std::string fallback_file;
    std::vector<char*> fallback_argv, fallback_envp;
    if (has_fallback) {
      fallback_file = resolve_command(req.shell_fallback[0], req.env, cwd);
      fallback_argv = c_strings(req.shell_fallback);
      fallback_envp = c_strings(req.env);
    }

    int errpipe[2];
    check(::pipe2(errpipe, O_CLOEXEC), "pipe2");
    UniqueFd err_read(errpipe[0]), err_write(errpipe[1]);

    // CLONE_VM|CLONE_VFORK: the child borrows our memory until it execs, so no page tables are
    // copied and no copy-on-write faults follow (a fork per command was a third of an exec's
    // cost). It runs on its own stack and only makes system calls; we sleep until it execs.
    ChildArgs child{req.tty,
                    slave_path.c_str(),
                    req.tty ? nullptr : &stdio,
                    cwd.c_str(),
                    file.c_str(),
                    argv.data(),
                    sh_argv.data(),
                    envp.data(),
                    has_fallback ? fallback_file.c_str() : nullptr,
                    fallback_argv.data(),
                    fallback_envp.data(),
                    err_write.get()};
    static constexpr size_t kChildStack = 64 * 1024;
    alignas(16) static char child_stack[kChildStack];
    const pid_t pid = ::clone(run_child, child_stack + kChildStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &child);
    if (pid < 0) throw sys_error("clone(CLONE_VM|CLONE_VFORK)");
    err_write.reset();

    ChildFailure f{};
    ssize_t n;
    do {
      n = ::read(err_read.get(), &f, sizeof f);
    } while (n < 0 && errno == EINTR);
    if (n == sizeof f) {
      ::waitpid(pid, nullptr, 0);
      const std::string what = f.stage == ChildFailure::cwd    ? "cwd " + cwd
                               : f.stage == ChildFailure::exec ? req.argv[0]
                                                               : std::string("terminal");
      protocol::send_message(control_, protocol::SpawnFailed{id, what + ": " + std::strerror(f.err), f.err});
      return;
    }
    children_[pid] = id;
    children_by_spawn_[id] = pid;
    if (req.tty) {
      const int fd = master.get();
      protocol::send_message(control_, protocol::Spawned{id, pid}, {&fd, 1});
    } else {
      protocol::send_message(control_, protocol::Spawned{id, pid});
    }
  }

  // No pty left for a command: either the box holds all its devpts allows (max=, the box's
  // own limit: the daemon answers 429) or the host's pool is spent (kernel.pty.max: 503). The
  // box's own count tells which; this is the only time init looks.
  void refuse_without_pty(uint64_t id) {
    const uint32_t limit = spec_.limits.ptys;
    if (limit != 0 && ptys_in_use() >= limit) {
      const std::string n = std::to_string(limit);
      protocol::send_message(control_,
                             protocol::SpawnFailed{id,
                                                   "this box holds all " + n + " of its terminals ([box] ptys = " + n +
                                                       "): end a terminal or a program that holds one, "
                                                       "or run the command without a pty",
                                                   ENOSPC, protocol::SpawnFailure::box_ptys});
      return;
    }
    protocol::send_message(control_, protocol::SpawnFailed{id,
                                                           "the host has no terminal left for any box "
                                                           "(kernel.pty.max); try again later, or run the "
                                                           "command without a pty",
                                                           ENOSPC, protocol::SpawnFailure::host_ptys});
  }

  // The box's ptys: the numbered entries of its own devpts.
  static size_t ptys_in_use() {
    size_t n = 0;
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/dev/pts"), ::closedir);
    if (!dir) return 0;
    while (const dirent* e = ::readdir(dir.get()))
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') ++n;
    return n;
  }

  // What the child of spawn() needs, all prepared before the clone.
  struct ChildArgs {
    bool tty;
    const char* slave_path;
    const std::vector<UniqueFd>* pipes;  // pipes mode: [0..2] become stdin, stdout, stderr
    const char* cwd;
    const char* file;  // resolved executable
    char** argv;
    char** sh_argv;  // {"sh", file, argv[1..]}: for a file without #!
    char** envp;
    const char* fallback_file;  // the shell command argv stands for, or null
    char** fallback_argv;
    char** fallback_envp;
    int err_fd;
  };

  static std::vector<char*> c_strings(const std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
  }

  // The environment bash -c gives a plain command it execs: `_` names the program, and SHLVL
  // is kept (bash counts itself in, then out again on exec), "0" when there was none.
  static std::vector<std::string> env_as_shell_execs(const std::vector<std::string>& env, const std::string& file) {
    std::vector<std::string> out;
    out.reserve(env.size() + 2);
    bool has_shlvl = false;
    for (const auto& e : env) {
      if (e.rfind("_=", 0) == 0) continue;
      has_shlvl = has_shlvl || e.rfind("SHLVL=", 0) == 0;
      out.push_back(e);
    }
    if (!has_shlvl) out.push_back("SHLVL=0");
    out.push_back("_=" + file);
    return out;
  }

  // Tells spawn() why the child could not exec, and ends it.
  [[noreturn]] static NO_SANITIZE_ADDRESS void child_failed(int err_fd, ChildFailure::Stage stage) {
    ChildFailure f{stage, errno};
    (void)!::write(err_fd, &f, sizeof f);
    ::_exit(127);
  }

  // The child, sharing init's memory until execve: system calls only, no allocation, no return.
  // Not instrumented by ASan: it runs on its own stack, which ASan cannot tell from a smashed one.
  static NO_SANITIZE_ADDRESS int run_child(void* arg) {
    const auto& c = *static_cast<ChildArgs*>(arg);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::setsid();
    if (c.tty) {
      int slave = ::open(c.slave_path, O_RDWR);
      if (slave < 0 || ::ioctl(slave, TIOCSCTTY, 0) != 0) child_failed(c.err_fd, ChildFailure::tty);
      for (int fd = 0; fd < 3; ++fd)
        if (::dup2(slave, fd) < 0) child_failed(c.err_fd, ChildFailure::tty);
      if (slave > 2) ::close(slave);
    } else {
      for (int fd = 0; fd < 3; ++fd)
        if (::dup2((*c.pipes)[fd].get(), fd) < 0) child_failed(c.err_fd, ChildFailure::tty);
    }
    if (::chdir(c.cwd) != 0) child_failed(c.err_fd, ChildFailure::cwd);
    ::umask(022);
    ::execve(c.file, c.argv, c.envp);
    if (c.fallback_file) {
      ::execve(c.fallback_file, c.fallback_argv, c.fallback_envp);
    } else if (errno == ENOEXEC) {
      ::execve("/bin/sh", c.sh_argv, c.envp);
    }
    child_failed(c.err_fd, ChildFailure::exec);
    return 127;
  }

  // The file execvp would run for argv0, searched in the command's own PATH (its env, not
  // init's), so the child only has to call execve. Relative PATH entries count from cwd.
  static std::string resolve_command(const std::string& argv0, const std::vector<std::string>& env,
                                     const std::string& cwd) {
    if (argv0.empty() || argv0.find('/') != std::string::npos) return argv0;
    std::string path = "/bin:/usr/bin";  // glibc's default when PATH is unset
    for (const auto& e : env)
      if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
    // string_view pieces and append: GCC 12 at -O3 reports a false -Wrestrict for the
    // std::string temporaries of substr/operator+ here.
    std::string_view rest = path;
    for (;;) {
      const size_t end = rest.find(':');
      std::string_view dir = rest.substr(0, end);
      if (dir.empty()) dir = ".";
      std::string candidate;
      if (dir.front() != '/') candidate.append(cwd).append("/");
      candidate.append(dir).append("/").append(argv0);
      struct stat st {};
      if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
        return candidate;
      if (end == std::string_view::npos) break;
      rest.remove_prefix(end + 1);
    }
    return {};  // not found: execve("") fails with ENOENT, as execvp would
  }

  // Only a command of ours that has not been reaped: its pid (and group, and session) cannot have
  // been reused, so the signal reaches what the daemon means. With whole_session, also a
  // session whose leader was reaped after an earlier whole_session signal (a terminal's shell
  // that a hangup ended while a job of it ignored the hangup): its id stays reserved by the
  // kernel while any member lives, and it is forgotten once a SIGKILL left none.
  void signal(const protocol::Signal& m) {
    if (m.sig < 0 || m.sig > 64) throw Error("signal: bad signal number");
    auto it = children_by_spawn_.find(m.spawn);
    bool delivered = false;
    pid_t sid = 0;
    if (it != children_by_spawn_.end()) {
      const pid_t pid = it->second;
      // The whole process group the command leads; the pid alone if it left its group.
      if (::kill(-pid, m.sig) == 0 || (errno == ESRCH && ::kill(pid, m.sig) == 0)) {
        delivered = true;
      } else if (errno != ESRCH) {
        throw sys_error("kill");
      }
      if (m.whole_session) {
        sid = pid;
        signalled_sessions_.insert(m.spawn);
      }
    } else if (auto left = sessions_left_.find(m.spawn); m.whole_session && left != sessions_left_.end()) {
      sid = left->second;
    }
    // And every other process group of its session: a shell's jobs, background ones too. A
    // member forking meanwhile is caught by the next round of SIGKILL.
    for (int round = 0; sid != 0 && round < (m.sig == SIGKILL ? 3 : 1); ++round) {
      const auto members = session_members(sid);
      if (members.empty()) break;
      for (pid_t member : members)
        if (::kill(member, m.sig) == 0) delivered = true;
    }
    if (m.sig == SIGKILL) sessions_left_.erase(m.spawn);
    protocol::send_message(control_, protocol::Signalled{m.id, delivered});
  }

  void reap() {
    signalfd_siginfo si;
    while (::read(sigfd_.get(), &si, sizeof si) == sizeof si) {
    }
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      auto it = children_.find(pid);
      if (it == children_.end()) continue;  // an orphan re-parented to init
      const uint64_t spawn = it->second;
      children_.erase(it);
      children_by_spawn_.erase(spawn);
      // A session told to end whose leader went first: its other members stay reachable.
      if (signalled_sessions_.erase(spawn) && !session_members(pid).empty()) sessions_left_[spawn] = pid;
      protocol::send_message(events_, protocol::Exited{spawn, status});
    }
  }

  int control_, events_;
  std::optional<FirstMessage> first_;  // see run()
  UniqueFd sigfd_;
  BoxSpec spec_;
  std::map<pid_t, uint64_t> children_;           // commands not yet reaped → their Spawn id
  std::map<uint64_t, pid_t> children_by_spawn_;  // the same, by Spawn id
  std::set<uint64_t> signalled_sessions_;        // unreaped spawns whose session got a signal
  std::map<uint64_t, pid_t> sessions_left_;      // reaped such spawns with members left → session id
};

}  // namespace

int run(int control_fd, int event_fd, std::optional<FirstMessage> first) {
  // The daemon placed these with dup2, which clears close-on-exec: without it every command
  // in the box would inherit both sockets and could forge replies and exit events.
  for (int fd : {control_fd, event_fd})
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) return 1;
  try {
    return Init(control_fd, event_fd, std::move(first)).run();
  } catch (const std::exception& e) {
    try {
      protocol::send_message(control_fd, protocol::StartFailed{e.what()});
    } catch (...) {
    }
    return 1;
  }
}

}  // namespace agentbox::init
