#pragma once
// A file's contents as one raw DEFLATE stream (RFC 1951) and its CRC-32, for a zip entry, with
// the file's holes never read and never deflated: a 1 GiB sparse file costs milliseconds, not
// the ~4 s of a core zlib takes to deflate a GiB of zeros.
//
// The data extents (lseek SEEK_DATA / SEEK_HOLE) are read and deflated as usual. Before a hole
// the stream is full-flushed (byte-aligned, no reference back past the flush), and the hole is
// written as copies of zeros deflated once per process: a run of 2^k zero bytes (4 KiB to 1 MiB)
// deflated by a fresh stream and ended by a full flush starts and ends on a byte boundary and
// refers to nothing before it, so it may stand anywhere between two flushes, any number of times.
// The CRC of a hole is combined from the runs' (crc32_combine_op). What is left of a hole below
// 4 KiB is deflated as ordinary zeros.
//
// Data that does not compress (already compressed, encrypted, random) costs zlib as much at any
// level as the best text (~20 s of a core per GiB here) and gains nothing: once a MiB of data
// came out at 90% of its size or more, what follows is stored (level 0, about a tenth of the
// cost) for as long as a 16 KiB sample of each piece read does not compress below 90% at level
// 1 in a small window (a sixteenth of the piece at low cost); then the usual level again.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace agentbox {

class SparseDeflater {
 public:
  // Deflates bytes [0, length) of fd (open for reading; not owned), or up to its end if it is
  // shorter when read (a file that shrinks meanwhile ends the stream early, as read() would).
  SparseDeflater(int fd, std::uint64_t length);
  ~SparseDeflater();
  SparseDeflater(const SparseDeflater&) = delete;
  SparseDeflater& operator=(const SparseDeflater&) = delete;

  // Up to `room` bytes of the stream; 0 once all of it has been given. Throws agentbox::Error
  // (with errno) when the file cannot be read.
  std::size_t read(char* out, std::size_t room);

  std::uint32_t crc() const { return static_cast<std::uint32_t>(crc_); }  // of the bytes deflated so far
  std::uint64_t bytes_in() const { return pos_; }                         // bytes deflated so far, holes included
  std::uint64_t bytes_read() const { return bytes_read_; }                // of them read from the file (data only)
  std::uint64_t bytes_stored() const { return bytes_stored_; }            // of them stored, not compressed

 private:
  void refill();       // appends more of the stream to pending_
  void find_extent();  // at pos_: the hole before the next data, or the data's end
  void emit_hole();    // some of hole_left_, as deflated runs of zeros
  void deflate_bytes(const void* data, std::size_t n, int flush);
  void judge_compression(const char* data, std::size_t n);  // after each piece: store what does not compress
  bool sample_compresses(const char* data, std::size_t n);
  void set_level(int level);

  int fd_;
  std::uint64_t end_;            // where the stream ends (shrinks if the file does)
  std::uint64_t pos_ = 0;        // file offset deflated up to
  std::uint64_t data_end_ = 0;   // end of the data extent pos_ is in (pos_ when unknown)
  std::uint64_t hole_left_ = 0;  // zeros still to emit at pos_
  std::uint64_t bytes_read_ = 0;
  std::uint64_t bytes_stored_ = 0;
  uLong crc_;
  int level_;                             // zs_'s: the usual one, or 0 while storing
  uLong window_in_ = 0, window_out_ = 0;  // zs_'s totals where the current judgement began
  z_stream zs_{};
  z_stream probe_{};  // samples stored data: does it compress again?
  std::vector<char> probe_out_;
  bool flushed_ = true;    // nothing went into zs_ since its last full flush (or its start)
  bool finished_ = false;  // Z_FINISH done: pending_ holds the rest
  std::string pending_;    // stream bytes made, from pending_pos_ on not yet given
  std::size_t pending_pos_ = 0;
  std::vector<char> in_;  // a data extent's bytes on their way to zs_
};

}  // namespace agentbox
