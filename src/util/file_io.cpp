#include "util/file_io.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "util/error.hpp"
#include "util/random_hex.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

std::string read_fd(int fd, size_t max, const std::string& what) {
  std::string out;
  char buf[4096];
  while (out.size() < max) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sys_error("read(" + what + ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sys_error("write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void replace_file(const std::string& path, std::string_view data, unsigned mode) {
  const std::string temp = path + ".tmp-" + random_hex(6);
  UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) throw sys_error("open(" + temp + ")");
  try {
    write_all(fd.get(), data);
    if (::fsync(fd.get()) == -1) throw sys_error("fsync(" + temp + ")");
    if (::rename(temp.c_str(), path.c_str()) == -1) throw sys_error("rename(" + temp + ", " + path + ")");
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
}

std::string read_file(const std::string& path, size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw sys_error("open(" + path + ")");
  return read_fd(fd.get(), max, path);
}

std::optional<std::string> read_file_if_exists(const std::string& path, size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd && errno == ENOENT) return std::nullopt;
  if (!fd) throw sys_error("open(" + path + ")");
  return read_fd(fd.get(), max, path);
}

std::string read_file_at(int dirfd, const std::string& name, size_t max) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw sys_error("open(" + name + ")");
  return read_fd(fd.get(), max, name);
}

void write_file(const std::string& path, std::string_view data) { write_file_at(AT_FDCWD, path, data); }

void write_file_at(int dirfd, const std::string& name, std::string_view data) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_WRONLY | O_CLOEXEC | O_TRUNC));
  if (!fd) throw sys_error("open(" + name + ")");
  try {
    write_all(fd.get(), data);
  } catch (const Error& e) {
    throw e.wrap(name);
  }
}

std::string path_next_to_self(std::string_view name) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};  // never a path relative to the cwd
  return (self.parent_path() / name).string();
}

std::vector<std::string> dir_names_at(int dirfd) {
  // A descriptor of its own: readdir moves the offset, and closedir closes it.
  UniqueFd copy(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!copy) throw sys_error("open directory");
  DIR* dir = ::fdopendir(copy.get());
  if (!dir) throw sys_error("fdopendir");
  copy.release();
  std::vector<std::string> out;
  errno = 0;
  while (dirent* e = ::readdir(dir)) {
    std::string_view n(e->d_name);
    if (n != "." && n != "..") out.emplace_back(n);
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) throw sys_error("readdir", err);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace agentbox
