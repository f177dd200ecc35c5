#pragma once
// The filtered /etc of the daemon's boxes (DESIGN §3), made once instead of once per box. The
// zygote keeps it in a mount namespace of its own (a slave of the host's, so new host mounts
// still show): the allowlisted host files copied onto a tmpfs at /tmp (read-only once built),
// the allowlisted directories bound in it, and empty files where each box binds its own passwd,
// group, hostname and hosts (mounts::kEtcTemplate). A box's init clones that tree in one
// open_tree instead of copying ~30 files and binding ~14 directories, and all boxes share one
// copy of the files. inotify on the host's /etc tells the zygote to rebuild it, so a box still
// sees /etc as it was when the box started.
#include <string>

#include "util/unique_fd.hpp"

namespace agentbox::etc_template {

class Keeper {
 public:
  // Enters a new mount namespace for the calling process (the zygote) and builds the first
  // template. When either fails, ready() is false (error() says why) and boxes copy /etc.
  Keeper();
  bool ready() const { return ready_; }
  // Why there is no template (when !ready()).
  const std::string& error() const { return error_; }
  // A template tmpfs of ours covers /tmp: every init cloned from here must detach it.
  bool mounted() const { return mounted_; }
  // Readable when the host's /etc changed (poll it with the zygote's socket).
  int watch_fd() const { return watch_.get(); }
  // Rebuilds the template if /etc changed since it was built; cheap when nothing did.
  void refresh();

 private:
  void build();

  UniqueFd watch_;
  bool mounted_ = false;  // a template tmpfs of ours is on /tmp
  bool ready_ = false;
  std::string error_;
};

}  // namespace agentbox::etc_template
