#pragma once
// The daemon's box-init factory (DESIGN §3, "Creation"). A box's init used to be cloned and then
// exec'd from agentbox-init every time; on this class of VM the exec and a static binary's start
// are most of a cold start. The zygote is agentbox-init exec'd once, with a clean environment,
// that clones each new box's init from itself on request: the child already runs init's code,
// so a box starts with one clone and no exec. It holds nothing of the daemon's (no memory, no
// fds but its request socket) and keeps nothing of any box's: a request's spec and descriptors
// go to the new init, which starts on them at once, and are dropped by the zygote.
//
// Host-uid boxes only: a user-namespace box needs its parent to write its id maps.
#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>

#include "box/messages.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {

class Zygote {
 public:
  // Clones and execs `init_path --zygote` (vfork-style, as a box init is).
  static std::unique_ptr<Zygote> start(const std::string& init_path);
  ~Zygote();  // closes its socket (it exits) and reaps it
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  struct Init {
    pid_t pid = -1;  // in the caller's pid namespace; a child of the zygote, not the caller's
    UniqueFd pidfd;
    std::string etc_template_error;  // the zygote has no /etc template: init copies /etc
  };
  // Clones a box init with clone3 `flags` (its namespaces; CLONE_INTO_CGROUP needs cgroup_fd),
  // control and events as its fds 3 and 4. The init starts on `start`, the message it would
  // otherwise wait for on its control socket, with netns_fd attached when >= 0. A zygote found
  // dead is replaced and asked again, once; one that dies or stalls after taking the request
  // fails this start and is replaced for the next. Thread-safe: requests are serialized.
  Init clone_init(uint64_t flags, int cgroup_fd, int control, int events, const protocol::StartBox& start,
                  int netns_fd);

  pid_t pid() const { return pid_; }

 private:
  Zygote() = default;
  void launch();
  void relaunch();  // reaps the current zygote (killing it if need be) and launches another
  Init request(uint64_t flags, int cgroup_fd, int control, int events, const protocol::StartBox& start, int netns_fd);

  std::string init_path_;
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  UniqueFd sock_;
  bool broken_ = false;  // a request went unanswered: relaunch before the next
  std::mutex mu_;
};

}  // namespace agentbox
