#include "daemon/mcp_instance_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "util/error.hpp"
#include "util/log.hpp"

namespace agentbox::daemon {
namespace {

constexpr std::string_view kLockSuffix = ".lock";

UniqueFd open_lock(const std::string& path, int flags) {
  return UniqueFd(::open(path.c_str(), flags | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600));
}

// The runs whose lock nobody holds ended without cleaning up: their directories go.
void remove_stale(const std::string& root) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(kLockSuffix) || name.size() == kLockSuffix.size()) continue;
    UniqueFd lock = open_lock(entry.path().string(), 0);
    if (!lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive (or not ours to judge)
    const std::string dir = root + "/" + name.substr(0, name.size() - kLockSuffix.size());
    std::error_code rm;
    std::filesystem::remove_all(dir, rm);
    if (rm) {
      log::warn("mcp", "stale state {}: {}", dir, rm.message());
      continue;
    }
    ::unlink(entry.path().c_str());
    log::info("mcp", "removed the state of an earlier run that ended without it: {}", dir);
  }
}

}  // namespace

McpInstanceDir::McpInstanceDir(const std::string& root) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) throw Error("mkdir(" + root + "): " + ec.message());
  ::chmod(root.c_str(), 0700);
  remove_stale(root);
  const std::string name = std::to_string(::getpid());
  lock_path_ = root + "/" + name + std::string(kLockSuffix);
  lock_ = open_lock(lock_path_, O_CREAT);
  if (!lock_) throw sys_error("open(" + lock_path_ + ")");
  check(::flock(lock_.get(), LOCK_EX | LOCK_NB), "flock(" + lock_path_ + ")");
  dir_ = root + "/" + name;
  std::filesystem::remove_all(dir_, ec);  // a dead run's of the same pid, unlocked since
  if (::mkdir(dir_.c_str(), 0700) != 0) throw sys_error("mkdir(" + dir_ + ")");
}

McpInstanceDir::~McpInstanceDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (ec) log::warn("mcp", "state {} left: {}", dir_, ec.message());
  ::unlink(lock_path_.c_str());
}

}  // namespace agentbox::daemon
