#include "box/init/zygote_loop.hpp"

#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "box/init/etc_template.hpp"
#include "box/init/init_in_place.hpp"
#include "box/messages.hpp"
#include "util/error.hpp"

namespace agentbox::init {
namespace {

// What a request may ask for: the namespaces of a box and a group to be born in. Nothing that
// would share anything with the zygote (CLONE_VM, CLONE_FILES, ...) or map users.
constexpr uint64_t kAllowedFlags =
    CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_PIDFD | CLONE_INTO_CGROUP;

void serve_clone(int sock, protocol::Message& m, etc_template::Keeper& etc) {
  auto req = protocol::decode_as<protocol::CloneInit>(m.body);
  const uint64_t flags = req.flags | CLONE_PIDFD;
  if (flags & ~kAllowedFlags) throw Error("zygote: flags not allowed");
  const bool into_cgroup = flags & CLONE_INTO_CGROUP;
  const bool has_netns = req.start.has_netns;
  if (m.fds.size() != 2u + has_netns + into_cgroup) throw Error("zygote: wrong number of descriptors");
  etc.refresh();  // a change not yet seen by the poll below
  protocol::Cloned reply;
  req.start.etc_template_mounted = etc.mounted();
  if (req.start.etc == EtcSource::zygote_template && !etc.ready()) {
    req.start.etc = EtcSource::init_copy;
    reply.etc_template_error = etc.error().empty() ? "no template" : etc.error();
  }

  int pidfd = -1;
  clone_args args{};
  args.flags = flags;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  if (into_cgroup) args.cgroup = static_cast<uint64_t>(m.fds.back().get());
  // The child starts on this CPU, where it runs as soon as we wait for the next request: put
  // on an idle vCPU, a new task first waits for the hypervisor to run that vCPU (0.5-1 ms on
  // the VMs measured). It takes back every CPU first thing.
  cpu_set_t all, here;
  const bool pin = ::sched_getaffinity(0, sizeof all, &all) == 0;
  if (pin) {
    CPU_ZERO(&here);
    CPU_SET(::sched_getcpu(), &here);
    ::sched_setaffinity(0, sizeof here, &here);
  }
  const long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pin) ::sched_setaffinity(0, sizeof all, &all);
  if (pid < 0) throw sys_error("clone3");
  if (pid == 0) become_init(m.fds[0].get(), m.fds[1].get(), has_netns ? m.fds[2].get() : -1, std::move(req.start));
  UniqueFd own_pidfd(pidfd);
  m = {};  // the new init's descriptors are its own now
  reply.pid = static_cast<pid_t>(pid);
  const int fd = own_pidfd.get();
  protocol::send_message(sock, reply, {&fd, 1});
}

}  // namespace

int run_zygote(int sock) {
  // Children are reaped by the kernel: the daemon follows each init through its pidfd.
  ::signal(SIGCHLD, SIG_IGN);
  etc_template::Keeper etc;
  for (;;) {
    pollfd p[2] = {{sock, POLLIN, 0}, {etc.watch_fd(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (p[1].revents & POLLIN) etc.refresh();  // between requests, off a box start's path
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    protocol::Message m;
    try {
      if (protocol::recv(sock, m) != protocol::RecvStatus::message) return 0;  // the daemon is gone
      serve_clone(sock, m, etc);
    } catch (const std::exception& e) {  // a refused or malformed request, a failed clone
      const auto* err = dynamic_cast<const Error*>(&e);
      try {
        protocol::send_message(sock, protocol::CloneFailed{e.what(), err ? err->code() : 0});
      } catch (...) {
        return 1;
      }
    }
  }
}

}  // namespace agentbox::init
