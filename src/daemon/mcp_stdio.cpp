#include "daemon/mcp_stdio.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "cli/run_box.hpp"
#include "daemon/daemon.hpp"
#include "daemon/mcp_instance_dir.hpp"
#include "mcp/dispatch.hpp"
#include "mcp/stdio_server.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::daemon {

namespace {

// The protocol's descriptors, taken away from 0 and 1: stdout becomes stderr for everything
// else the daemon prints (its banner, its log), and stdin /dev/null for what it starts.
struct ProtocolFds {
  UniqueFd in, out;
};

ProtocolFds take_stdio() {
  ProtocolFds fds;
  fds.in.reset(::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3));
  fds.out.reset(::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3));
  if (!fds.in || !fds.out) throw sys_error("dup(stdin, stdout)");
  check(::dup2(STDERR_FILENO, STDOUT_FILENO), "dup2(stderr, stdout)");
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null) throw sys_error("open(/dev/null)");
  check(::dup2(null.get(), STDIN_FILENO), "dup2(/dev/null, stdin)");
  return fds;
}

std::string state_dir_of(const std::string& caller_home) {
  if (const char* xdg = ::getenv("XDG_STATE_HOME"); xdg && *xdg == '/') return std::string(xdg) + "/agentbox/mcp";
  return caller_home + "/.local/state/agentbox/mcp";
}

// A mount namespace of this process's own, the host's mounts still arriving in it (slave):
// the state's tmpfs and the home's bind mount exist only here, and go when the process does.
void private_mounts(const std::string& state_dir) {
  check(::unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)");
  check(::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr), "mount(/, MS_SLAVE)");
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) throw Error("mkdir(" + state_dir + "): " + ec.message());
  check(::mount("agentbox-mcp", state_dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=1g"),
        "mount(tmpfs, " + state_dir + ")");
}

ServerConfig local_config(const std::string& state_dir, const BoxSpec& spec, const cli::RunBox& run) {
  ServerConfig c;
  c.state_dir = state_dir;
  c.listen = "127.0.0.1:0";
  // One account, whose uid is the run box's (slot 0 of the server's range, which no server
  // account takes): the store gives base + 1.
  c.accounts.uid_base = spec.uid - 1;
  c.accounts.uid_count = 2;
  c.accounts.spare_volumes = 0;
  c.storage.quota.disk_bytes = 0;  // plain directories: the home is the caller's own directory
  c.box = spec.limits;
  if (run.egress) c.egress = *run.egress;
  return c;
}

}  // namespace

int serve_mcp_stdio(const cli::RunOptions& options) {
  cli::RunBox run = cli::make_run_box(options);
  ProtocolFds fds = take_stdio();
  // Root: a tmpfs in a mount namespace of its own. An ordinary user (run's user_ns boxes) can
  // mount nothing here: a directory of this run's on disk, removed after the daemon.
  std::optional<McpInstanceDir> instance;
  std::string state_dir = state_dir_of(run.caller_home);
  if (run.spec.identity == IdentityMode::user_ns) {
    instance.emplace(state_dir);
    state_dir = instance->path();
  } else {
    private_mounts(state_dir);
  }
  cli::ensure_run_home(run.spec);

  ServeOptions serve;
  serve.local = LocalUser{run.spec.name, run.spec, run.env, run.egress.has_value()};
  Daemon daemon(local_config(state_dir, run.spec, run), serve);
  daemon.serve_stdio(fds.in.get(), fds.out.get());
  daemon.stop();
  return 0;
}

void Daemon::serve_stdio(int in, int out) {
  const LocalUser& local = *options_.local;
  // The account first, then its home: the run home bound where its volume's home would be, so
  // the boxes and the file routes both see the caller's directory.
  const Account account = accounts_.get_or_create(local.user);
  if (account.uid != local.spec.uid)
    throw Error("mcp: the account's uid " + std::to_string(account.uid) + " is not the run box's " +
                std::to_string(local.spec.uid));
  if (local.spec.identity == IdentityMode::user_ns) {
    // An ordinary user binds nothing over the volume: the run home is the account's home.
    volumes_->set_home(account.name, local.spec.home_source);
  } else {
    const VolumePaths paths = volumes_->paths(account.name);
    for (const std::string& dir : {paths.root, paths.home})
      if (::mkdir(dir.c_str(), dir == paths.home ? 0700 : 0711) != 0 && errno != EEXIST)
        throw sys_error("mkdir(" + dir + ")");
    check(::mount(local.spec.home_source.c_str(), paths.home.c_str(), nullptr, MS_BIND, nullptr),
          "mount(" + local.spec.home_source + ", " + paths.home + ", MS_BIND)");
  }

  sigset_t stop;
  sigemptyset(&stop);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, s);  // blocked in every thread (StopSignals)
  UniqueFd sigfd(::signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd) throw sys_error("signalfd");

  mcp::CallerContext caller;
  caller.headers.set("X-User-Id", local.user);
  mcp::StdioServer server(mcp::make_mcp_server(services_), std::move(caller), in, out);
  log::info("mcp", "serving {} over stdio: home {}, state {}", local.user, local.spec.home_source, config_.state_dir);
  const bool ended = server.serve(sigfd.get());
  log::info("mcp", "{}: stopping", ended ? "end of input" : "signal");
}

}  // namespace agentbox::daemon
