#pragma once
// The output of one process (DESIGN §5): an append-only log on disk plus a bounded tail in
// memory, addressed by ABSOLUTE byte offsets counted from the process start. Offsets never
// reset: when the log outgrows its cap, the oldest segment file is dropped and a read from an
// offset that is gone starts at the oldest byte kept, with `truncated` set.
//
// On disk: up to three segment files PATH.0, PATH.1, PATH.2 (log_segment.hpp) of cap/2 data
// bytes each; the newest `cap` bytes are always kept, at most 1.5 × cap are on disk. PATH.0 is
// made with the first output: a log with no output has no file (open() then says ENOENT). Reads of
// recent output come from the memory tail; older ones from the files. A log can be reopened
// read-only after a daemon restart and reads the same offsets.
//
// UTF-8: an append that ends inside a character holds those bytes back until the rest arrives
// (or finish()), and a read cut by max_bytes ends on a character boundary, so answers do not
// split characters of valid UTF-8 output. Lines: a read cut by max_bytes ends after a newline
// when there is one in its last kLineSnapBytes, never between '\r' and '\n'; and while the log is
// still written, a '\r' at its very end is not readable yet (end_offset() excludes it) until
// what follows it arrives (a terminal's "\r\n" can come in two pieces), so clients that turn
// each answer's "\r\n" into "\n" count every line once.
//
// Thread-safe: one writer (the process table's loop), readers from any thread.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exec/log_segment.hpp"
#include "exec/stream_type.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::exec {

struct LogChunk {
  StreamType type = StreamType::output;
  std::string data;
};

struct LogRead {
  std::vector<LogChunk> chunks;  // adjacent chunks have different types
  uint64_t next_offset = 0;      // where the next read continues
  bool truncated = false;        // output before the returned part is gone (cap) or was cut (tail)
  bool more = false;             // output past next_offset exists already (max_bytes cut it)
};

class OutputLog {
 public:
  static constexpr size_t kMemoryTail = 64 << 10;
  static constexpr size_t kLineSnapBytes = 4096;

  // A new, empty, writable log. Fails with EEXIST when PATH.0 exists (ids are unique).
  static std::unique_ptr<OutputLog> create(const std::string& path, uint64_t cap, size_t memory_tail = kMemoryTail);
  // An existing log, read-only. Throws Error (ENOENT) when no segment of it is readable.
  static std::unique_ptr<OutputLog> open(const std::string& path);
  // Deletes the log's files (missing ones are fine).
  static void remove(const std::string& path);

  OutputLog(const OutputLog&) = delete;
  OutputLog& operator=(const OutputLog&) = delete;

  // Adds output. A failing disk is not fatal: the log goes on in memory only, and what the disk
  // missed is written once it takes writes again (the next append tries, at most once a second).
  void append(StreamType type, std::string_view data);
  // No more output: held-back bytes are written and the file is closed. True when output the disk
  // refused is still missing from it (write_missed may write it later).
  bool finish();
  // Writes what the disk refused earlier (full, out of inodes) if it takes it now and the memory
  // tail still holds all of it: a command that ran while its account's volume was full keeps its
  // output across a restart once the volume has room. True while something is still missing
  // that a later call could write; false once the log is whole on disk, or cannot be.
  bool write_missed();
  // The log's files are about to be removed (the record is purged): write_missed must not make
  // them again.
  void abandon();

  // Output from offset on, at most max_bytes of it; with tail_lines, only the last that many
  // lines of what is kept past offset (then the newest max_bytes of those).
  LogRead read(uint64_t offset, size_t max_bytes, std::optional<uint64_t> tail_lines = {}) const;

  uint64_t end_offset() const;    // offset after the last readable byte (a held '\r' is not yet)
  uint64_t begin_offset() const;  // oldest byte still readable
  const std::string& path() const { return path_; }

 private:
  struct Run {  // where the memory tail switches stream type
    uint64_t offset;
    StreamType type;
  };

  OutputLog(std::string path, uint64_t cap, size_t memory_tail);
  std::string segment_file(int slot) const;
  void commit(StreamType type, std::string_view data);
  void persist(StreamType type, std::string_view data);
  void resume_disk(bool now);
  bool missed_locked() const;
  bool start_first_segment();
  void write_frame(StreamType type, std::string_view data);
  void rotate();
  void remember(StreamType type, std::string_view data);
  uint64_t begin_locked() const;
  uint64_t readable_end_locked() const;
  void collect(uint64_t from, uint64_t to, std::vector<LogChunk>& out) const;
  void collect_from_disk(uint64_t from, uint64_t to, std::vector<LogChunk>& out) const;
  uint64_t tail_start(uint64_t lo, uint64_t hi, uint64_t lines) const;

  const std::string path_;
  const uint64_t cap_;
  const uint64_t segment_size_;  // data bytes after which a new segment starts
  const size_t tail_cap_;

  mutable std::mutex mu_;             // guards everything below
  std::deque<SegmentInfo> segments_;  // oldest first, contiguous
  UniqueFd writer_;                   // the newest segment, while the log is writable (and has output)
  bool writable_ = false;
  bool disk_ok_ = true;  // false after a failed write: memory tail only, until resume_disk
  bool abandoned_ = false;
  std::chrono::steady_clock::time_point next_disk_try_{};
  uint64_t end_ = 0;
  std::string tail_;  // output [tail_begin_, end_)
  uint64_t tail_begin_ = 0;
  std::deque<Run> runs_;            // front run starts at or before tail_begin_
  std::string held_[kStreamTypes];  // unfinished UTF-8 sequence per stream
};

}  // namespace agentbox::exec
