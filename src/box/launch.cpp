#include "box/launch.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "box/contain/identity.hpp"
#include "box/contain/mounts.hpp"
#include "box/etc_snapshots.hpp"
#include "box/init/init_in_place.hpp"
#include "box/messages.hpp"
#include "box/start_steps.hpp"
#include "util/file_io.hpp"
#include "util/no_sanitize.hpp"

namespace agentbox {
namespace {

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
  if (::dup2(c.control, protocol::kInitControlFd) < 0 || ::dup2(c.events, protocol::kInitEventFd) < 0) ::_exit(126);
  ::syscall(SYS_close_range, protocol::kInitEventFd + 1, ~0U, 0);
  // The daemon ignores SIGPIPE (serve_main.cpp), and an ignored signal stays ignored across
  // execve: init and the commands of the box get the default back (the kernel's sigaction,
  // raw: nothing of libc's here).
  struct {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  } dfl{SIG_DFL, 0, nullptr, 0};
  ::syscall(SYS_rt_sigaction, SIGPIPE, &dfl, nullptr, sizeof dfl.mask);
  if (c.mask) ::sigprocmask(SIG_SETMASK, c.mask, nullptr);
  ::execve(c.path, const_cast<char**>(c.argv), const_cast<char**>(c.envp));
  ::_exit(127);
}

// The threads of this process (/proc/self/stat's 20th field); 0 when it cannot be read.
long threads_of_self() {
  try {
    const std::string stat = read_file("/proc/self/stat", 4096);
    const char* p = stat.c_str() + stat.rfind(')') + 2;  // field 3, after the command name
    for (int field = 3; field < 20 && p; ++field)
      if ((p = std::strchr(p, ' '))) ++p;
    return p ? std::strtol(p, nullptr, 10) : 0;
  } catch (const Error&) {
    return 0;
  }
}

// Clones init (ClonePath::vfork_exec, clone3_exec or in_place). The vfork-style clone
// (CLONE_VM|CLONE_VFORK on a stack of its own) copies nothing of the caller, so a box starts as
// fast from a daemon holding thousands of connections as from a fresh one; the caller's
// signals are blocked meanwhile so no handler of its runs in the child. In place, the clone is
// a copy of the caller that becomes init without an exec: only for a caller with one thread (a
// lock another thread held at the clone would stay held in the copy forever).
pid_t clone_init(const StartPlan& plan, int cgroup_fd, const std::string& init_path, int control, int events, int go_fd,
                 int* pidfd) {
  const char* argv[] = {"agentbox-init", nullptr};
  const char* envp[] = {protocol::kInitPath, nullptr};
  InitExec child{init_path.c_str(), argv, envp, control, events, go_fd, nullptr};
  const uint64_t flags = plan.clone_flags;

  if (plan.clone == ClonePath::vfork_exec) {
    sigset_t all, saved;
    sigfillset(&all);
    check(::pthread_sigmask(SIG_SETMASK, &all, &saved), "pthread_sigmask");
    child.mask = &saved;
    constexpr size_t kStack = 64 * 1024;
    std::unique_ptr<char[]> stack(new char[kStack]);  // not zeroed: the child touches its top only
    // glibc's clone() takes the pidfd pointer where clone(2) takes parent_tid.
    const int pid = ::clone(exec_init, stack.get() + kStack, static_cast<int>(flags) | CLONE_VM | CLONE_VFORK | SIGCHLD,
                            &child, pidfd);
    const int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    if (pid < 0) throw sys_error(fmt::format("clone(flags={:#x})", flags), err);
    return pid;
  }

  if (plan.clone == ClonePath::in_place && threads_of_self() != 1)
    throw Error("init in place: the caller has more than one thread");
  clone_args args{};
  args.flags = flags;
  args.pidfd = reinterpret_cast<uint64_t>(pidfd);
  args.exit_signal = SIGCHLD;
  if (flags & CLONE_INTO_CGROUP) args.cgroup = static_cast<uint64_t>(cgroup_fd);
  const long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) throw sys_error(fmt::format("clone3(flags={:#x})", flags));
  if (pid == 0 && plan.clone == ClonePath::in_place) {
    // Once the id maps are written (user namespace), as an exec'd init would wait.
    char go;
    if (go_fd >= 0 && ::read(go_fd, &go, 1) != 1) ::_exit(125);
    init::become_init(control, events);
  }
  if (pid == 0) exec_init(&child);
  return static_cast<pid_t>(pid);
}

protocol::StartBox start_message(const BoxSpec& spec, const StartPlan& plan, const BoxStartOptions& opts) {
  protocol::StartBox m;
  m.spec = spec;
  m.has_netns = opts.netns_fd >= 0;
  m.legacy_mounts = plan.legacy_mounts;
  m.await_cgroup = plan.cgroup == CgroupTiming::join_after_clone;
  m.etc = plan.etc;
  m.hold_before_ready = opts.hold_before_ready;
  return m;
}

// The parent's /etc for the box: a clone of the shared snapshot when the caller keeps them,
// else (or when that fails) a tree of its own.
mounts::EtcTree parent_etc_tree(const BoxSpec& spec, const BoxStartOptions& opts) {
  if (!opts.etc_snapshots.empty()) {
    try {
      return shared_etc_tree(spec, opts.etc_snapshots);
    } catch (const Error& e) {
      step_failed(StartStep::etc_snapshot, e.what());
    }
  }
  return mounts::build_etc_tree(spec);
}

// The start message to an init cloned here, with the account's netns and, as planned, the
// box's /etc built now (while init execs, so it is off init's path).
void send_start(LaunchedBox& box, protocol::StartBox msg, const BoxStartOptions& opts) {
  std::vector<int> fds;
  if (opts.netns_fd >= 0) fds.push_back(opts.netns_fd);
  mounts::EtcTree etc;
  if (msg.etc == EtcSource::parent_tree) {
    try {
      etc = parent_etc_tree(box.spec, opts);
      fds.push_back(etc.fd.get());
      msg.etc_tree_dirs = etc.dirs;
      box.etc_hold = std::move(etc.hold);
    } catch (const Error& e) {
      step_failed(StartStep::parent_etc, e.what());
      box.etc_fallback = e.what();
      msg.etc = EtcSource::init_copy;
    }
  }
  protocol::send_message(box.control.get(), msg, fds);
}

}  // namespace

std::unique_ptr<LaunchedBox> launch_box(const BoxSpec& spec, const BoxStartOptions& opts) {
  if (spec.use_cgroup && !opts.cgroups) throw Error("box: cgroups requested but no cgroup driver available");
  const HostCaps caps = opts.caps ? *opts.caps : HostCaps::probe(opts.cgroups && opts.cgroups->clones_into());
  StartOffer offer;
  offer.zygote = opts.zygote != nullptr;
  offer.netns = opts.netns_fd >= 0;
  offer.force_legacy_mounts = opts.legacy_mount_api;
  offer.in_place = opts.init_in_place;

  auto box = std::make_unique<LaunchedBox>();
  box->spec = spec;
  box->plan = plan_start(spec, offer, caps);
  const StartPlan& plan = box->plan;

  if (plan.cgroup == CgroupTiming::clone_into)
    box->cgroup = opts.cgroups->create(opts.cgroup_name, spec.limits, opts.cgroup_use);
  auto [control_parent, control_child] = protocol::socket_pair();
  auto [events_parent, events_child] = protocol::socket_pair();
  box->control = std::move(control_parent);
  box->events = std::move(events_parent);

  const int cg_fd = box->cgroup ? box->cgroup->clone_into_fd() : -1;
  UniqueFd go_read, go_write;
  if (spec.identity == IdentityMode::user_ns) {
    int p[2];
    check(::pipe2(p, O_CLOEXEC), "pipe2");
    go_read.reset(p[0]);
    go_write.reset(p[1]);
  }
  protocol::StartBox start = start_message(spec, plan, opts);
  try {
    if (plan.clone == ClonePath::zygote) {
      Zygote::Init init = opts.zygote->clone_init(plan.clone_flags, cg_fd, control_child.get(), events_child.get(),
                                                  start, opts.netns_fd);
      box->init_pid = init.pid;
      box->pidfd = std::move(init.pidfd);
      box->init_is_child = false;
      if (!init.etc_template_error.empty()) box->etc_fallback = init.etc_template_error;
    } else {
      int pidfd = -1;
      box->init_pid =
          clone_init(plan, cg_fd, opts.init_path, control_child.get(), events_child.get(), go_read.get(), &pidfd);
      box->pidfd.reset(pidfd);
    }
  } catch (const Error& e) {
    throw e.wrap("box " + spec.name);  // ~LaunchedBox removes a cgroup made for it
  }
  control_child.reset();
  events_child.reset();

  // From here a failure must end the half-made box: ~LaunchedBox does.
  try {
    identity::apply_from_parent(spec, box->init_pid);
    if (go_write) {
      check(::write(go_write.get(), "g", 1), "write(go)");
      go_write.reset();
    }
    if (plan.clone != ClonePath::zygote) send_start(*box, std::move(start), opts);
    if (plan.cgroup == CgroupTiming::join_after_clone) {
      box->cgroup = opts.cgroups->create(opts.cgroup_name, spec.limits, opts.cgroup_use);
      // v1: init joins itself through the group's files, no grace period; else we attach it.
      std::vector<UniqueFd> join_fds = box->cgroup->open_self_join();
      protocol::CgroupJoined joined;
      joined.join_self = !join_fds.empty();
      // Init may give up before it needs the cgroup (a mount that fails) and exit: then it can
      // be neither attached (ESRCH) nor told, and its answer to the start says why.
      try {
        if (!joined.join_self) box->cgroup->attach(box->init_pid);
      } catch (const Error& e) {
        if (e.code() != ESRCH) throw;
        box->cgroup_confirmed = false;
      }
      if (box->cgroup_confirmed) {
        std::vector<int> fds;
        for (const UniqueFd& fd : join_fds) fds.push_back(fd.get());
        try {
          protocol::send_message(box->control.get(), joined, fds);
        } catch (const Error&) {
          box->cgroup_confirmed = false;  // init gave up before it needed the cgroup: its answer says why
        }
      }
    }
  } catch (const Error& e) {
    throw e.wrap("box " + spec.name);
  }
  return box;
}

LaunchedBox::~LaunchedBox() {
  try {
    end();
  } catch (const Error&) {
    // An owner that cares calls end() itself and reports it (BoxOwner does).
  }
}

void LaunchedBox::end() {
  // Killing PID 1 of the namespace kills every process in it.
  if (pidfd) {
    ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
    if (init_is_child) {
      siginfo_t si{};
      while (::waitid(P_PIDFD, static_cast<id_t>(pidfd.get()), &si, WEXITED) != 0 && errno == EINTR) {
      }
    } else {
      // Readable once init has exited, and with it every process of its pid namespace (the
      // zygote reaps it): the cgroup is empty from then on.
      pollfd p{pidfd.get(), POLLIN, 0};
      while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
      }
    }
    pidfd.reset();
  }
  control.reset();
  events.reset();
  etc_hold.reset();  // init, the last user of the box's /etc, is gone
  if (cgroup) {
    std::unique_ptr<Cgroup> group = std::move(cgroup);
    group->destroy();  // retries while the last tasks exit; throws if the group stays
  }
}

std::string default_init_path() {
  namespace fs = std::filesystem;
  if (const char* env = ::getenv("AGENTBOX_INIT"); env && *env) return env;
  std::error_code ec;
  if (fs::path next = path_next_to_self("agentbox-init"); !next.empty() && fs::exists(next, ec)) return next;
#ifdef AGENTBOX_BUILD_DIR
  fs::path built = fs::path(AGENTBOX_BUILD_DIR) / "agentbox-init";
  if (fs::exists(built, ec)) return built;
#endif
  return "/usr/local/libexec/agentbox/agentbox-init";
}

}  // namespace agentbox
