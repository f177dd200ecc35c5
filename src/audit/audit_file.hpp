#pragma once
// The audit trail's file: lines appended with one write() each (O_APPEND), so a process killed
// at any moment leaves every line whole or absent; rotated by size (PATH.1 the newest of the
// old ones, PATH.N the oldest, at most max_files of them) and by age (rotated files older than
// keep_days are removed). A write that fails or falls short (ENOSPC, EIO) is undone (the file cut
// back to its last whole line) and reported: the caller decides what stops.
//
// Runs on: the trail's writer thread alone.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/unique_fd.hpp"

namespace agentbox::audit {

struct FileOptions {
  std::string path;            // the file written now
  std::uint64_t max_size = 0;  // bytes; a line that would pass it rotates first; 0 = never
  unsigned max_files = 5;      // rotated files kept (PATH.1 .. PATH.N)
  unsigned keep_days = 0;      // rotated files older than this are removed; 0 = kept
};

class AuditFile {
 public:
  explicit AuditFile(FileOptions options) : options_(std::move(options)) {}

  // Opens (creating the directory and the file, mode 0600) and cuts a torn last line, left by
  // a crash of an older writer, off. Returns 0 or the errno of the step that failed.
  int open();
  // Writes line (which ends in '\n') whole or not at all. Returns 0 or the errno.
  int append(std::string_view line);

 private:
  int rotate();
  void prune_old();

  FileOptions options_;
  UniqueFd fd_;
  off_t size_ = 0;  // bytes in the file, all of them whole lines
  std::chrono::steady_clock::time_point last_prune_{};
};

}  // namespace agentbox::audit
