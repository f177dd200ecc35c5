#include "fs/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_error.hpp"
#include "util/file_io.hpp"
#include "util/random_hex.hpp"

namespace agentbox {
namespace {

std::string random_temp_name() { return ".agentbox-" + random_hex(8) + ".tmp"; }

}  // namespace

AtomicFile::AtomicFile(EntryRef target, std::string shown, Mode mode)
    : target_(std::move(target)), shown_(std::move(shown)), mode_(mode) {
  if (mode_ == Mode::unnamed) {
    fd_.reset(::openat(target_.dir.get(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666));
    // Filesystems without O_TMPFILE say EOPNOTSUPP (older kernels EISDIR).
    if (!fd_ && errno != EOPNOTSUPP && errno != EISDIR) throw_fs_errno(errno, shown_);
    if (!fd_) mode_ = Mode::named;
  }
  if (mode_ == Mode::named) {
    for (int attempt = 0; !fd_; ++attempt) {
      std::string name = random_temp_name();
      fd_ = open_in_dir(target_.dir.get(), name, O_WRONLY | O_CREAT | O_EXCL, 0666);
      if (fd_)
        temp_name_ = std::move(name);
      else if (errno != EEXIST || attempt > 8)
        throw_fs_errno(errno, shown_);
    }
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_ && !temp_name_.empty()) ::unlinkat(target_.dir.get(), temp_name_.c_str(), 0);
}

void AtomicFile::write(std::string_view data) {
  try {
    write_all(fd_.get(), data);
  } catch (const Error& e) {
    throw_fs_errno(e.code(), shown_);  // ENOSPC, EDQUOT, EFBIG ... say what went wrong
  }
  size_ += data.size();
}

void AtomicFile::link_under_temp_name() {
  // linkat(AT_EMPTY_PATH) would need CAP_DAC_READ_SEARCH, which the account's fs identity does
  // not have; the /proc/self/fd link of our own descriptor needs nothing.
  std::string self = "/proc/self/fd/" + std::to_string(fd_.get());
  for (int attempt = 0;; ++attempt) {
    std::string name = random_temp_name();
    if (::linkat(AT_FDCWD, self.c_str(), target_.dir.get(), name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      temp_name_ = std::move(name);
      return;
    }
    if (errno != EEXIST || attempt > 8) throw_fs_errno(errno, shown_);
  }
}

void AtomicFile::set_times(const struct timespec& atime, const struct timespec& mtime) {
  const struct timespec times[2] = {atime, mtime};
  fs_check(::futimens(fd_.get(), times), shown_);
}

void AtomicFile::commit() {
  struct stat old;
  if (mode_bits_ >= 0)
    fs_check(::fchmod(fd_.get(), static_cast<mode_t>(mode_bits_)), shown_);
  else if (::fstatat(target_.dir.get(), target_.name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode))
    fs_check(::fchmod(fd_.get(), old.st_mode & 0777), shown_);
  fs_check(::fsync(fd_.get()), shown_);
  if (mode_ == Mode::unnamed) link_under_temp_name();
  fs_check(::renameat(target_.dir.get(), temp_name_.c_str(), target_.dir.get(), target_.name.c_str()), shown_);
  committed_ = true;
  sync_directory();
}

void AtomicFile::sync_directory() {
  // The rename lasts only once its directory is on disk: answered before that, a disk that fails
  // before the next journal commit brings the old file back after a restart (tests/soak's
  // full_state fault showed it). target_.dir is O_PATH, which fsync refuses: reopen ".". A
  // directory the account made unreadable still syncs, through its filesystem.
  UniqueFd dir(::openat(target_.dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir)
    fs_check(::fsync(dir.get()), shown_);
  else
    fs_check(::syncfs(fd_.get()), shown_);
}

}  // namespace agentbox
