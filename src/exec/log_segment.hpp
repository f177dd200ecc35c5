#pragma once
// The on-disk format of one output-log segment (output_log.hpp keeps up to three per process):
//
//   header  "ABXOLOG1" | u64 base offset | u64 cap       (24 bytes)
//   frames  u8 stream type | u32 length | length bytes    (appended, never rewritten)
//
// `base` is the absolute output offset of the segment's first data byte, so offsets stay
// valid when older segments are dropped. Integers are in host byte order: logs never leave the
// machine that wrote them. A frame cut short by a crash ends the segment when it is read back.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exec/stream_type.hpp"

namespace agentbox::exec {

constexpr size_t kSegmentHeaderSize = 24;
constexpr size_t kFrameHeaderSize = 5;
constexpr uint32_t kMaxFrameData = 64 << 10;  // appends are split into frames of at most this
constexpr uint64_t kIndexStride = 64 << 10;   // data bytes between two index points

struct SegmentHeader {
  uint64_t base = 0;  // absolute offset of the first data byte
  uint64_t cap = 0;   // the log's output_cap when it was written
};

std::string encode_segment_header(const SegmentHeader& h);
std::string encode_frame_header(StreamType type, uint32_t length);

// A place to start reading a segment at without scanning it from the beginning.
struct IndexPoint {
  uint64_t offset = 0;    // absolute output offset of a frame's first data byte
  uint64_t file_pos = 0;  // where that frame's header starts in the file
};

// What is known about one segment file: the range it holds and a sparse frame index.
struct SegmentInfo {
  int slot = 0;                // file name suffix (path.<slot>)
  uint64_t base = 0, end = 0;  // absolute offsets [base, end) held
  uint64_t cap = 0;
  uint64_t file_size = 0;         // bytes of whole frames (a partial last frame is not counted)
  std::vector<IndexPoint> index;  // index[0] is {base, kSegmentHeaderSize}
};

// Sequential frame reader over a segment file descriptor, buffered with pread.
class FrameReader {
 public:
  FrameReader(int fd, uint64_t file_pos);
  // The next frame's header; false at the end of the file or at a damaged or partial frame.
  bool next(StreamType& type, uint32_t& length);
  // The data of the frame next() announced (valid until the next call).
  std::string_view data();
  // Steps over that data without reading it.
  void skip();
  // File position just after the last frame consumed.
  uint64_t position() const { return pos_; }
  // Reads the segment header at the start of the file; nullopt when it is not one.
  static std::optional<SegmentHeader> read_header(int fd);

 private:
  bool fill(size_t n);  // makes [pos_, pos_ + n) available in buf_

  int fd_;
  uint64_t file_size_ = 0;
  std::string buf_;
  uint64_t buf_pos_ = 0;  // file position of buf_[0]
  uint64_t pos_;
  uint32_t pending_ = 0;  // data length of the frame announced by next()
};

// Reads a whole segment file back: its header, its frames' extent and a sparse index.
// nullopt when the file is missing or not a segment.
std::optional<SegmentInfo> load_segment(const std::string& file, int slot);

}  // namespace agentbox::exec
