#include "box/cgroup_fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "util/error.hpp"
#include "util/file_io.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::cgroupfs {
namespace {

constexpr auto kRemoveDeadline = std::chrono::seconds(1);
constexpr auto kRemoveRetryPause = std::chrono::milliseconds(10);

uint64_t parse_u64(std::string_view text, const std::string& path) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text == "max") return std::numeric_limits<uint64_t>::max();
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw Error("read(" + path + "): not a number: \"" + std::string(text) + "\"");
  return value;
}

// rmdir on cgroupfs never says ENOTEMPTY (child groups and tasks are EBUSY); only a plain
// directory does, i.e. the fake trees of the unit tests, whose "knobs" are ordinary files.
bool is_cgroupfs(const std::string& dir) {
  struct statfs st {};
  if (::statfs(dir.c_str(), &st) != 0) return true;  // unknown: never delete anything
  return st.f_type == CGROUP_SUPER_MAGIC || st.f_type == CGROUP2_SUPER_MAGIC;
}

void remove_plain_files(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) throw sys_error("opendir(" + dir + ")");
  while (const dirent* e = ::readdir(d.get())) {
    if (e->d_type == DT_DIR) continue;
    if (::unlinkat(::dirfd(d.get()), e->d_name, 0) != 0) throw sys_error("unlink(" + dir + "/" + e->d_name + ")");
  }
}

}  // namespace

void check_group_name(const std::string& name) {
  if (name.empty() || name == "." || name.find('/') != std::string::npos || name.find("..") != std::string::npos ||
      name.find('\0') != std::string::npos)
    throw Error("invalid cgroup name \"" + name + "\": must be one path component without '..'", EINVAL);
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

bool make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) return true;
  if (errno != EEXIST) throw sys_error("mkdir(" + path + ")");
  return false;
}

void check_writable(const std::string& dir) {
  if (::access(dir.c_str(), W_OK) != 0) throw sys_error("access(" + dir + ", W_OK)");
}

void write_knob(const std::string& path, std::string_view value) {
  const std::string op = "write(" + path + ", \"" + std::string(value) + "\")";
  // O_TRUNC as a shell redirect does: harmless on cgroupfs, needed for the fake trees.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd) throw sys_error(op);
  // One write(2): cgroupfs parses each write as a whole value.
  ssize_t n;
  do {
    n = ::write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) throw sys_error(op);
  if (static_cast<size_t>(n) != value.size()) throw Error(op + ": short write", EIO);
}

uint64_t read_u64(const std::string& path) { return parse_u64(read_file(path, 4096), path); }

uint64_t read_u64_or_zero(const std::string& path) {
  const std::optional<std::string> text = read_file_if_exists(path, 4096);
  return text ? parse_u64(*text, path) : 0;
}

uint64_t read_keyed_u64(const std::string& path, std::string_view key) {
  const std::optional<std::string> text = read_file_if_exists(path, 64 << 10);
  if (!text) return 0;
  std::istringstream in(*text);
  std::string k, v;
  while (in >> k >> v) {
    if (k == key) return parse_u64(v, path);
  }
  return 0;
}

std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  const std::optional<std::string> text = read_file_if_exists(path, 16 << 20);  // gone: no tasks
  if (!text) return pids;
  std::istringstream in(*text);
  for (long pid; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

size_t kill_listed(const std::vector<std::string>& procs_files) {
  // A pid read here may exit and, in theory, be reused before kill(); v2 avoids this with
  // cgroup.kill, v1 has no race-free way short of freezing the group.
  size_t signalled = 0;
  for (const auto& file : procs_files) {
    for (pid_t pid : read_pids(file)) {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ++signalled;
    }
  }
  return signalled;
}

void remove_group_dir(const std::string& dir, const std::function<void()>& on_busy) {
  const auto deadline = std::chrono::steady_clock::now() + kRemoveDeadline;
  bool files_removed = false;
  for (;;) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    const int err = errno;
    if (err == ENOTEMPTY && !files_removed && !is_cgroupfs(dir)) {
      remove_plain_files(dir);
      files_removed = true;
      continue;
    }
    if (err != EBUSY || std::chrono::steady_clock::now() >= deadline) throw sys_error("rmdir(" + dir + ")", err);
    if (on_busy) on_busy();
    std::this_thread::sleep_for(kRemoveRetryPause);
  }
}

}  // namespace agentbox::cgroupfs
