#include "audit/audit_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <system_error>

namespace agentbox::audit {

namespace {

// The last '\n' of fd's first `size` bytes, plus one: where a torn last line starts.
off_t whole_lines_end(int fd, off_t size) {
  char buf[4096];
  off_t end = size;
  while (end > 0) {
    const off_t start = end > static_cast<off_t>(sizeof buf) ? end - static_cast<off_t>(sizeof buf) : 0;
    const ssize_t n = ::pread(fd, buf, static_cast<size_t>(end - start), start);
    if (n <= 0) return size;  // unreadable: left as it is
    for (ssize_t i = n - 1; i >= 0; --i)
      if (buf[i] == '\n') return start + i + 1;
    end = start;
  }
  return 0;
}

}  // namespace

int AuditFile::open() {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(options_.path).parent_path(), ec);
  if (ec) return ec.value();
  fd_.reset(::open(options_.path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
  if (!fd_) return errno;
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) return errno;
  size_ = st.st_size;
  if (const off_t whole = whole_lines_end(fd_.get(), size_); whole != size_) {
    if (::ftruncate(fd_.get(), whole) != 0) return errno;
    size_ = whole;
  }
  return 0;
}

int AuditFile::append(std::string_view line) {
  if (!fd_) {
    if (int err = open()) return err;
  }
  if (options_.max_size > 0 && size_ > 0 && static_cast<std::uint64_t>(size_) + line.size() > options_.max_size) {
    if (int err = rotate()) return err;
  }
  if (options_.keep_days > 0 && std::chrono::steady_clock::now() - last_prune_ > std::chrono::hours(1)) prune_old();
  const ssize_t n = ::write(fd_.get(), line.data(), line.size());
  if (n == static_cast<ssize_t>(line.size())) {
    size_ += n;
    return 0;
  }
  const int err = n < 0 ? errno : ENOSPC;                        // a short write: the disk filled in the middle
  if (n > 0 && ::ftruncate(fd_.get(), size_) != 0) fd_.reset();  // reopened (and repaired) next time
  return err;
}

int AuditFile::rotate() {
  for (unsigned i = options_.max_files; i >= 1; --i) {
    const std::string from = i == 1 ? options_.path : options_.path + "." + std::to_string(i - 1);
    const std::string to = options_.path + "." + std::to_string(i);
    if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT) return errno;
  }
  if (options_.max_files == 0 && ::unlink(options_.path.c_str()) != 0 && errno != ENOENT) return errno;
  fd_.reset();
  prune_old();
  return open();
}

// keep_days: rotated files whose last line is older go, at most once an hour (and at rotation).
void AuditFile::prune_old() {
  if (options_.keep_days == 0) return;
  last_prune_ = std::chrono::steady_clock::now();
  const std::time_t cutoff = std::time(nullptr) - static_cast<std::time_t>(options_.keep_days) * 86400;
  for (unsigned i = 1; i <= options_.max_files + 1; ++i) {
    const std::string old = options_.path + "." + std::to_string(i);
    struct stat st;
    if (::stat(old.c_str(), &st) == 0 && st.st_mtime < cutoff) ::unlink(old.c_str());
  }
}

}  // namespace agentbox::audit
