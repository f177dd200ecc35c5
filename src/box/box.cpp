#include "box/box.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "box/box_spec_json.hpp"
#include "box/contain/identity.hpp"
#include "box/contain/mounts.hpp"
#include "box/protocol.hpp"
#include "util/file_io.hpp"
#include "util/no_sanitize.hpp"

namespace agentbox {
namespace {

namespace t = protocol::t;

// The namespaces every box gets; network and user are added per spec (see clone_flags).
constexpr uint64_t kBoxNamespaces = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;

uint64_t clone_flags(const BoxSpec& spec, const BoxStartOptions& opts, bool into_cgroup) {
  uint64_t f = kBoxNamespaces | CLONE_PIDFD;
  if (opts.netns_fd < 0) f |= CLONE_NEWNET;
  if (spec.identity == IdentityMode::user_ns) f |= CLONE_NEWUSER;
  if (into_cgroup) f |= CLONE_INTO_CGROUP;
  return f;
}

// What the child needs between clone and execve, prepared before the clone.
struct InitExec {
  const char* path;
  const char* const* argv;
  const char* const* envp;
  int control, events, go_fd;
  const sigset_t* mask;  // the caller's signal mask, restored for init
};

// The child between clone and execve: raw system calls only (it may share the memory of a
// multi-threaded daemon). With a user namespace it first waits on go_fd until the parent has
// written its id maps: execve as an unmapped uid would drop the capabilities init needs.
// Not instrumented by ASan: in the vfork-style clone it runs on a stack ASan did not make.
NO_SANITIZE_ADDRESS int exec_init(void* arg) {
  const auto& c = *static_cast<const InitExec*>(arg);
  if (c.go_fd >= 0) {
    char b;
    if (::read(c.go_fd, &b, 1) != 1) ::_exit(125);
  }
  if (::dup2(c.control, protocol::kInitControlFd) < 0 || ::dup2(c.events, protocol::kInitEventFd) < 0)
    ::_exit(126);
  ::syscall(SYS_close_range, protocol::kInitEventFd + 1, ~0U, 0);
  if (c.mask) ::sigprocmask(SIG_SETMASK, c.mask, nullptr);
  ::execve(c.path, const_cast<char**>(c.argv), const_cast<char**>(c.envp));
  ::_exit(127);
}

// Clones and execs init. Without a user namespace or a clone into a cgroup it is vfork-style
// (CLONE_VM|CLONE_VFORK on a stack of its own): the caller's memory is not copied, so a box
// starts as fast from a daemon holding thousands of connections as from a fresh one. The
// caller's signals are blocked meanwhile so no handler of its runs in the child.
pid_t clone_init(uint64_t flags, int cgroup_fd, const std::string& init_path, int control,
                 int events, int go_fd, int* pidfd) {
  const char* argv[] = {"agentbox-init", nullptr};
  const char* envp[] = {protocol::kInitPath, nullptr};
  InitExec child{init_path.c_str(), argv, envp, control, events, go_fd, nullptr};

  if (!(flags & (CLONE_NEWUSER | CLONE_INTO_CGROUP))) {
    sigset_t all, saved;
    sigfillset(&all);
    check(::pthread_sigmask(SIG_SETMASK, &all, &saved), "pthread_sigmask");
    child.mask = &saved;
    constexpr size_t kStack = 64 * 1024;
    std::unique_ptr<char[]> stack(new char[kStack]);  // not zeroed: the child touches its top only
    // glibc's clone() takes the pidfd pointer where clone(2) takes parent_tid.
    const int pid = ::clone(exec_init, stack.get() + kStack,
                            static_cast<int>(flags) | CLONE_VM | CLONE_VFORK | SIGCHLD, &child, pidfd);
    const int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    if (pid < 0) throw sys_error(fmt::format("clone(flags={:#x})", flags), err);
    return pid;
  }

  clone_args args{};
  args.flags = flags;
  args.pidfd = reinterpret_cast<uint64_t>(pidfd);
  args.exit_signal = SIGCHLD;
  if (flags & CLONE_INTO_CGROUP) args.cgroup = static_cast<uint64_t>(cgroup_fd);
  const long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) throw sys_error(fmt::format("clone3(flags={:#x})", flags));
  if (pid == 0) exec_init(&child);
  return static_cast<pid_t>(pid);
}

// The spec to an init cloned here, with the account's netns and, where this process may
// build it, the box's /etc: made now, while init execs, it is off init's path.
void send_spec(int control, const BoxSpec& spec, const BoxStartOptions& opts, nlohmann::json msg) {
  std::vector<int> fds;
  if (opts.netns_fd >= 0) fds.push_back(opts.netns_fd);
  mounts::EtcTree etc;
  if (spec.identity == IdentityMode::host_uid && !opts.legacy_mount_api && !mounts::binds_into_etc(spec))
    etc = mounts::build_etc_tree(spec);
  msg["has_etc_tree"] = static_cast<bool>(etc.fd);
  if (etc.fd) {
    fds.push_back(etc.fd.get());
    msg["etc_tree_dirs"] = etc.dirs;
  }
  protocol::send(control, msg, fds);
}

}  // namespace

std::unique_ptr<Box> Box::start(const BoxSpec& spec, const BoxStartOptions& opts) {
  std::unique_ptr<Box> box(new Box());
  box->spec_ = spec;

  if (spec.use_cgroup && !opts.cgroups) throw Error("box: cgroups requested but no cgroup driver available");
  // A copying clone3 (the zygote's, or user_ns mode's) can put init straight into a v2 group.
  // Otherwise (v1, or host_uid's vfork-style clone_init) the group is made and joined while
  // init builds the box; init waits for it before its cgroup namespace and anything of its own.
  const bool via_zygote = opts.zygote && spec.identity == IdentityMode::host_uid;
  const bool cgroup_later =
      spec.use_cgroup &&
      (!opts.cgroups->clones_into() || (spec.identity == IdentityMode::host_uid && !via_zygote));
  if (spec.use_cgroup && !cgroup_later) {
    box->cgroup_ = opts.cgroups->create(opts.cgroup_name, spec.limits, opts.cgroup_use);
  }
  auto [control_parent, control_child] = protocol::socket_pair();
  auto [events_parent, events_child] = protocol::socket_pair();
  box->control_ = std::move(control_parent);
  box->events_ = std::move(events_parent);

  const int cg_fd = box->cgroup_ ? box->cgroup_->clone_into_fd() : -1;
  UniqueFd go_read, go_write;
  if (spec.identity == IdentityMode::user_ns) {
    int p[2];
    check(::pipe2(p, O_CLOEXEC), "pipe2");
    go_read.reset(p[0]);
    go_write.reset(p[1]);
  }
  // What init gets first: through the zygote with the clone request (init starts on it without
  // waiting for a message), else as the first message on its control socket.
  const nlohmann::json start_msg = {{"t", t::spec},
                                    {"spec", spec},
                                    {"has_netns", opts.netns_fd >= 0},
                                    {"legacy_mount_api", opts.legacy_mount_api},
                                    {"await_cgroup", cgroup_later}};
  try {
    const uint64_t flags = clone_flags(spec, opts, cg_fd >= 0);
    if (via_zygote) {
      Zygote::Init init = opts.zygote->clone_init(flags, cg_fd, control_child.get(), events_child.get(),
                                                  start_msg, opts.netns_fd);
      box->init_pid_ = init.pid;
      box->pidfd_ = std::move(init.pidfd);
      box->init_is_child_ = false;
    } else {
      int pidfd = -1;
      box->init_pid_ = clone_init(flags, cg_fd, opts.init_path, control_child.get(), events_child.get(),
                                  go_read.get(), &pidfd);
      box->pidfd_.reset(pidfd);
    }
  } catch (...) {
    if (box->cgroup_) box->cgroup_->destroy();
    throw;
  }
  control_child.reset();
  events_child.reset();

  // From here a failure must stop the half-made box: ~Box does.
  try {
    identity::apply_from_parent(spec, box->init_pid_);
    if (go_write) {
      check(::write(go_write.get(), "g", 1), "write(go)");
      go_write.reset();
    }
    if (!via_zygote) send_spec(box->control_.get(), spec, opts, start_msg);
    if (cgroup_later) {
      box->cgroup_ = opts.cgroups->create(opts.cgroup_name, spec.limits, opts.cgroup_use);
      // Init may give up before it needs the cgroup (a mount that fails) and exit: then it can
      // be neither attached (ESRCH) nor told, and its reply says why, as the start error.
      try {
        box->cgroup_->attach(box->init_pid_);
      } catch (const Error& e) {
        if (e.code() != ESRCH) throw;
        box->cgroup_confirmed_ = false;
      }
      if (box->cgroup_confirmed_) {
        try {
          protocol::send(box->control_.get(), {{"t", t::cgroup}});
        } catch (const Error&) {
          box->cgroup_confirmed_ = false;  // init gave up before it needed the cgroup: its reply says why
        }
      }
    }
    box->ready_pending_ = true;
    box->ready_timeout_ms_ = static_cast<int>(opts.ready_timeout.count());
  } catch (const Error& e) {
    throw e.wrap("box " + spec.name);
  }
  if (opts.await_ready) box->take_ready();
  return box;
}

void Box::take_ready() {
  if (!ready_pending_) return;
  ready_pending_ = false;
  try {
    protocol::Message reply = protocol::recv_reply(control_.get(), ready_timeout_ms_, "box start");
    if (!cgroup_confirmed_ && reply.type() == t::ready) throw Error("box start: init is ready without its cgroup");
    if (reply.type() == t::error) throw Error(reply.body.value("message", "unknown error"));
    if (reply.type() != t::ready) throw Error("box start: unexpected reply " + reply.type());
    landlock_abi_ = reply.body.value("landlock_abi", 0);
  } catch (const Error& e) {
    throw e.wrap("box " + spec_.name);
  }
}

protocol::Message Box::request(const nlohmann::json& msg, std::span<const int> fds, int timeout_ms,
                               const char* what) {
  try {
    protocol::send(control_.get(), msg, fds);
  } catch (const Error&) {
    take_ready();  // an init that gave up at its start has closed its end: its error says why
    throw;
  }
  take_ready();
  return protocol::recv_reply(control_.get(), timeout_ms, what);
}

Box::~Box() {
  try {
    stop();
  } catch (...) {
  }
}

SpawnResult Box::spawn(const SpawnRequest& req, std::span<const int> stdio) {
  if (!req.tty && stdio.size() != 3) throw Error("spawn: pipes mode needs stdin, stdout, stderr");
  std::lock_guard lock(mu_);
  if (stopped_) throw Error("spawn: box is stopped", ESRCH);
  const uint64_t id = next_id_++;
  nlohmann::json msg = {{"t", t::spawn}, {"id", id}, {"req", req}};
  protocol::Message reply = request(msg, req.tty ? std::span<const int>{} : stdio, 10000, "spawn");
  if (reply.type() == t::spawn_failed)
    throw SpawnError(reply.body.value("error", "spawn failed"), reply.body.value("errno", 0));
  if (reply.type() == t::error) throw Error("spawn: " + reply.body.value("message", "?"));
  if (reply.type() != t::spawned) throw Error("spawn: unexpected reply " + reply.type());
  SpawnResult r;
  r.pid = reply.body.at("pid").get<pid_t>();
  if (req.tty) {
    if (reply.fds.size() != 1) throw Error("spawn: init sent no pty");
    r.pty_master = std::move(reply.fds[0]);
  }
  return r;
}

void Box::signal(pid_t pid, int sig) {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  protocol::Message reply = request({{"t", t::kill}, {"pid", pid}, {"sig", sig}}, {}, 5000, "kill");
  if (reply.type() != t::ok) throw Error("kill: " + reply.body.value("message", "?"));
}

int Box::process_count() {
  std::lock_guard lock(mu_);
  if (stopped_) return 0;
  protocol::Message reply = request({{"t", t::status}}, {}, 5000, "status");
  return reply.body.value("procs", -1);
}

std::vector<ExitEvent> Box::read_events(bool* init_gone) {
  std::vector<ExitEvent> out;
  *init_gone = false;
  for (;;) {
    protocol::Message m;
    auto st = protocol::recv(events_.get(), m, /*nonblocking=*/true);
    if (st == protocol::RecvStatus::would_block) break;
    if (st == protocol::RecvStatus::eof) {
      *init_gone = true;
      break;
    }
    if (m.type() == t::exit)
      out.push_back({m.body.value("pid", 0), m.body.value("status", 0)});
  }
  return out;
}

CgroupUsage Box::usage() const { return cgroup_ ? cgroup_->usage() : CgroupUsage{}; }

void Box::stop() {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  // Killing PID 1 of the namespace kills every process in it.
  if (pidfd_) {
    ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    if (init_is_child_) {
      siginfo_t si{};
      while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &si, WEXITED) != 0 && errno == EINTR) {
      }
    } else {
      // Readable once init has exited, and with it every process of its pid namespace (the
      // zygote reaps it): the cgroup is empty from then on.
      pollfd p{pidfd_.get(), POLLIN, 0};
      while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
      }
    }
  }
  control_.reset();
  if (cgroup_) cgroup_->destroy();
}

std::string default_init_path() {
  namespace fs = std::filesystem;
  if (const char* env = ::getenv("AGENTBOX_INIT"); env && *env) return env;
  std::error_code ec;
  if (fs::path next = path_next_to_self("agentbox-init"); !next.empty() && fs::exists(next, ec))
    return next;
#ifdef AGENTBOX_BUILD_DIR
  fs::path built = fs::path(AGENTBOX_BUILD_DIR) / "agentbox-init";
  if (fs::exists(built, ec)) return built;
#endif
  return "/usr/local/libexec/agentbox/agentbox-init";
}

}  // namespace agentbox
