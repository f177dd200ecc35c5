#pragma once
// AtomicFile: a new file that replaces an entry only when complete. It is written as an unnamed
// O_TMPFILE in the target's directory, so a crash or an error at any point leaves nothing
// behind; commit() fsyncs it, links it under a random temporary name and renames that over the
// target in one step, then syncs the directory, so what commit() returns for stays after a crash.
// Readers see the old file or the new one, never a partial one.
//
// Filesystems without O_TMPFILE get a named temporary file (".agentbox-<random>.tmp") that is
// unlinked on failure and by the destructor (a crash can leave that one behind).
//
// Construct, write and commit with the account's fs identity held (the file is created as the
// account and counted against its quota).
#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "fs/confined_dir.hpp"

namespace agentbox {

class AtomicFile {
 public:
  enum class Mode { unnamed, named };  // how the temporary file is made; unnamed when possible

  // Starts a file meant to become `target` (shown: its path as the box sees it, for errors).
  AtomicFile(EntryRef target, std::string shown, Mode mode = Mode::unnamed);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view data);
  uint64_t size() const { return size_; }

  // The new file gets these permission bits instead of the replaced file's (a restore puts a
  // file back as it was).
  void set_mode(mode_t mode) { mode_bits_ = mode & 07777; }
  // Sets the new file's access and modification times; call after the last write().
  void set_times(const struct timespec& atime, const struct timespec& mtime);
  Mode mode() const { return mode_; }

  // Replaces the target. The permission bits of a regular file it replaces are kept (a script
  // stays executable); a new file gets 0666 less the umask.
  void commit();

 private:
  void link_under_temp_name();
  void sync_directory();

  EntryRef target_;
  std::string shown_;
  Mode mode_;
  UniqueFd fd_;
  std::string temp_name_;  // the name in target_.dir while one exists
  uint64_t size_ = 0;
  bool committed_ = false;
  int mode_bits_ = -1;  // set_mode(); -1: keep the replaced file's
};

}  // namespace agentbox
