#pragma once
// The state directory of one `agentbox mcp` run by an ordinary user, who cannot put a tmpfs
// over it: ROOT/PID on disk, next to ROOT/PID.lock, which the run holds locked (flock) while it
// lives. The destructor removes both; a run killed before it could is found at the next start
// (its lock takes) and removed then. Root's runs keep theirs on a tmpfs instead
// (daemon/mcp_stdio.cpp).
//
// Runs on: the main thread of agentbox-serve (made before the daemon, gone after it).
#include <string>

#include "util/unique_fd.hpp"

namespace agentbox::daemon {

class McpInstanceDir {
 public:
  // Makes ROOT (0700) and this run's directory in it, after removing those of runs that ended
  // without removing their own. Throws Error naming the step.
  explicit McpInstanceDir(const std::string& root);
  ~McpInstanceDir();
  McpInstanceDir(const McpInstanceDir&) = delete;
  McpInstanceDir& operator=(const McpInstanceDir&) = delete;

  const std::string& path() const { return dir_; }

 private:
  std::string dir_, lock_path_;
  UniqueFd lock_;  // flock'd: this run is alive
};

}  // namespace agentbox::daemon
