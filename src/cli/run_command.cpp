#include "cli/run_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <string_view>
#include <vector>

#include "box/box.hpp"
#include "box/box_env.hpp"
#include "box/cgroup.hpp"
#include "box/etc_snapshots.hpp"
#include "cli/run_box.hpp"
#include "cli/terminal.hpp"
#include "config/bind_spec.hpp"
#include "config/run_profile.hpp"
#include "config/server_config.hpp"
#include "config/units.hpp"
#include "net/egress_policy.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"

namespace agentbox::cli {
namespace {

constexpr int kExitBoxFailed = 125;
// Variables of the caller that describe the terminal and locale, not secrets: passed through.
constexpr const char* kTerminalEnv[] = {"TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ", "NO_COLOR"};

std::vector<std::string> make_env(const std::map<std::string, std::string>& set, const BoxSpec& spec) {
  // The caller's terminal settings (TERM, LANG, LC_*) pass through over the defaults.
  std::map<std::string, std::string> env = base_env(spec, /*tty=*/true);
  auto pass = [&](const std::string& name) {
    if (const char* v = ::getenv(name.c_str())) env[name] = v;
  };
  for (const char* name : kTerminalEnv) pass(name);
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LC_", 3) == 0) pass(std::string(*e, std::strcspn(*e, "=")));
  for (const auto& [k, v] : set) env[k] = v;
  return env_strings(env);
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Signals agentbox forwards to the command; SIGWINCH resizes the pty.
UniqueFd block_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGPIPE}) sigaddset(&set, s);
  check(::sigprocmask(SIG_BLOCK, &set, nullptr), "sigprocmask");
  UniqueFd fd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd) throw sys_error("signalfd");
  return fd;
}

// Copies what is readable on `from` to `to`; false at EOF/EIO (pty closed).
bool pump(int from, int to) {
  char buf[65536];
  ssize_t n = ::read(from, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  try {
    write_all(to, std::string_view(buf, static_cast<size_t>(n)));
  } catch (const Error&) {
    return false;
  }
  return true;
}

// Bytes the CLI carries in one direction between the caller and the box: a terminal's (pty
// mode), or a terminal of the caller's that pipes mode must not hand into the box.
struct Relay {
  int from = -1, to = -1;
  UniqueFd owned;       // our end of a pipe: closed when the relay ends, so the box sees end of input
  bool output = false;  // box → caller: drained once the command has exited
  bool open = true;
};

// The command's stdin, stdout and stderr in pipes mode: the caller's own, except a terminal,
// which is never handed into a box (the box could change its settings or type into it): a
// pipe stands in for it and the bytes are relayed. Pipes mode with a terminal among them happens
// when only some of the caller's fds are terminals (`cmd < file`, `echo x | agentbox run ...`).
struct PipesStdio {
  UniqueFd box_ends[3];
  std::vector<Relay> relays;
  int fds[3] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
};

PipesStdio pipes_stdio() {
  PipesStdio io;
  for (int fd = 0; fd < 3; ++fd) {
    if (!::isatty(fd)) continue;
    int p[2];
    check(::pipe2(p, O_CLOEXEC), "pipe2");
    Relay r;
    if (fd == STDIN_FILENO) {
      io.box_ends[fd].reset(p[0]);
      r.owned.reset(p[1]);
      r.from = fd;
      r.to = r.owned.get();
    } else {
      io.box_ends[fd].reset(p[1]);
      r.owned.reset(p[0]);
      r.from = r.owned.get();
      r.to = fd;
      r.output = true;
    }
    io.fds[fd] = io.box_ends[fd].get();
    io.relays.push_back(std::move(r));
  }
  return io;
}

// Waits for the command's exit while relaying bytes and forwarding signals.
int supervise(Box& box, uint64_t child, int pty, std::vector<Relay> relays, const UniqueFd& sigfd) {
  std::optional<RawTerminal> raw;
  if (pty >= 0) {
    raw.emplace(STDIN_FILENO);
    ::fcntl(pty, F_SETFL, ::fcntl(pty, F_GETFL) | O_NONBLOCK);
    relays.push_back({pty, STDOUT_FILENO, UniqueFd(), true});
    relays.push_back({STDIN_FILENO, pty, UniqueFd(), false});
  }
  std::optional<int> status;
  while (!status) {
    std::vector<pollfd> p = {{box.event_fd(), POLLIN, 0}, {sigfd.get(), POLLIN, 0}};
    for (const auto& r : relays) p.push_back({r.open ? r.from : -1, POLLIN, 0});
    if (::poll(p.data(), p.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw sys_error("poll");
    }
    for (size_t i = 0; i < relays.size(); ++i) {
      Relay& r = relays[i];
      if (!r.open || !(p[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (!pump(r.from, r.to)) {
        r.open = false;
        r.owned.reset();
      }
    }
    if (p[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sigfd.get(), &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGWINCH) {
          if (pty >= 0) copy_window_size(STDOUT_FILENO, pty);
        } else if (si.ssi_signo != SIGPIPE) {
          box.signal(child, static_cast<int>(si.ssi_signo));
        }
      }
    }
    if (p[0].revents & (POLLIN | POLLHUP)) {
      bool init_gone = false;
      for (const auto& e : box.read_events(&init_gone))
        if (e.id == child) status = e.status;
      if (!status && init_gone) throw Error("the box's init exited unexpectedly");
    }
  }
  // Output the command wrote just before exiting may still be on its way: drain it.
  for (Relay& r : relays) {
    if (!r.output || !r.open) continue;
    pollfd p{r.from, POLLIN, 0};
    while (::poll(&p, 1, 50) > 0 && (p.revents & (POLLIN | POLLHUP)) && pump(r.from, r.to)) {
    }
  }
  return exit_code(*status);
}

}  // namespace

int run_in_box(const RunOptions& o) {
  if (o.shell && !o.command.empty()) throw UsageError("give either --shell or a command, not both");
  if (!o.shell && o.command.empty()) throw UsageError("nothing to run: add -- COMMAND [ARGS...] or --shell");

  RunBox run_box = make_run_box(o);
  const BoxSpec& spec = run_box.spec;
  std::optional<net::EgressConfig>& egress_config = run_box.egress;
  SpawnRequest req;
  req.env = make_env(run_box.env, spec);
  req.argv = o.shell ? std::vector<std::string>{spec.shell, "-l"} : o.command;
  req.cwd = o.cwd ? std::filesystem::current_path().string() : spec.home_target;
  req.tty = ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
  if (req.tty) {
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
      req.rows = ws.ws_row;
      req.cols = ws.ws_col;
    }
  }

  // Blocked before the box exists, so a signal that arrives while it starts is forwarded once
  // the command runs instead of killing agentbox (init and the command get a clean mask).
  UniqueFd sigfd = block_signals();
  std::unique_ptr<CgroupDriver> cgroups;
  std::unique_ptr<Box> box;
  try {
    ensure_run_home(spec);
    BoxStartOptions opts;
    opts.init_path = default_init_path();
    opts.await_ready = false;  // the command goes with the spec; spawn reports a failed start
    // A copy of this process becomes init: no second static start (glibc's CPU probes, the
    // image's page faults), ~5% less CPU per run (bench/RESULTS.md). No thread and no signal
    // handler of ours exist yet (the egress proxy's thread starts after the box); the copy's
    // arguments and environment are wiped (box/init/init_in_place.hpp). An init named by
    // $AGENTBOX_INIT (tests; a ThreadSanitizer build's, whose runtime the box's seccomp filter
    // refuses) is exec'd. So is init in a sanitizer build: its runtime keeps a copy of the
    // caller's environment in memory of its own, which a copy of this process would take into
    // the box (tests/redteam/test_run_init_memory.py checks the shipped build's copy).
    const char* named_init = ::getenv("AGENTBOX_INIT");
#ifdef AGENTBOX_SANITIZE
    opts.init_in_place = false;
    (void)named_init;
#else
    opts.init_in_place = !named_init || !*named_init;
#endif
    // One /etc for every root one-shot box of the same inputs, made once (box/etc_snapshots.hpp):
    // copying it for each box was a tenth of a run's CPU.
    if (::geteuid() == 0) opts.etc_snapshots = kRunEtcSnapshots;
    if (spec.use_cgroup) {
      std::string why;
      cgroups = CgroupDriver::detect("/sys/fs/cgroup", &why);
      if (!cgroups) throw Error("cgroups unavailable: " + why + " (see agentbox doctor)");
      opts.cgroups = cgroups.get();
      opts.cgroup_name = "run-" + std::to_string(::getpid());
      opts.cgroup_use = CgroupUse::limits_only;  // nothing reads a one-shot box's usage
    }
    box = Box::start(spec, opts);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    std::cerr << "agentbox: cannot start the box: " << e.what() << "\n";
    return kExitBoxFailed;
  }
  // Before the command: its first request finds the proxy listening.
  std::optional<RunEgress> egress;
  try {
    if (egress_config) {
      egress.emplace(std::move(*egress_config), req.tty);
      egress->start(box->init_pid(), spec.egress_proxy_port);
    }
  } catch (const std::exception& e) {
    std::cerr << "agentbox: cannot start the network proxy: " << e.what() << "\n";
    return kExitBoxFailed;
  }

  SpawnResult child;
  PipesStdio io;
  try {
    if (!req.tty) io = pipes_stdio();
    child = box->spawn(req, req.tty ? std::span<const int>{} : std::span<const int>(io.fds));
  } catch (const SpawnError& e) {
    if (e.code() == ENOENT && req.argv[0].find('/') == std::string::npos) {
      std::cerr << "agentbox: " << req.argv[0] << ": command not found\n";
      return 127;
    }
    std::cerr << "agentbox: " << e.what() << "\n";
    return e.code() == ENOENT ? 127 : 126;
  } catch (const std::exception& e) {
    std::cerr << "agentbox: cannot start the box: " << e.what() << "\n";
    return kExitBoxFailed;
  }
  for (auto& end : io.box_ends) end.reset();  // the box holds its copies now
  return supervise(*box, child.id, req.tty ? child.pty_master.get() : -1, std::move(io.relays), sigfd);
}

}  // namespace agentbox::cli
