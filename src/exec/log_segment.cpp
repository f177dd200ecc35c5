#include "exec/log_segment.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::exec {
namespace {

constexpr std::string_view kMagic = "ABXOLOG1";
constexpr size_t kReadBlock = 64 << 10;

template <class T>
void put(std::string& out, T value) {
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  out.append(raw, sizeof(T));
}

template <class T>
T get(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

std::string encode_segment_header(const SegmentHeader& h) {
  std::string out(kMagic);
  put<uint64_t>(out, h.base);
  put<uint64_t>(out, h.cap);
  return out;
}

std::string encode_frame_header(StreamType type, uint32_t length) {
  std::string out(1, static_cast<char>(type));
  put<uint32_t>(out, length);
  return out;
}

FrameReader::FrameReader(int fd, uint64_t file_pos) : fd_(fd), buf_pos_(file_pos), pos_(file_pos) {
  struct stat st {};
  if (::fstat(fd, &st) == 0) file_size_ = static_cast<uint64_t>(st.st_size);
}

bool FrameReader::fill(size_t n) {
  if (pos_ + n > file_size_) return false;
  if (pos_ >= buf_pos_ && pos_ + n <= buf_pos_ + buf_.size()) return true;
  // Keep nothing from the old block: callers only move forward.
  const size_t want = std::max<size_t>(n, kReadBlock);
  buf_.resize(want);
  buf_pos_ = pos_;
  size_t got = 0;
  while (got < want) {
    const ssize_t r = ::pread(fd_, buf_.data() + got, want - got, static_cast<off_t>(pos_ + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  buf_.resize(got);
  return got >= n;
}

bool FrameReader::next(StreamType& type, uint32_t& length) {
  if (pending_ > 0) skip();
  if (!fill(kFrameHeaderSize)) return false;
  const char* p = buf_.data() + (pos_ - buf_pos_);
  const auto raw = static_cast<uint8_t>(p[0]);
  const auto len = get<uint32_t>(p + 1);
  if (!is_stream_type(raw) || len == 0 || len > kMaxFrameData) return false;
  if (pos_ + kFrameHeaderSize + len > file_size_) return false;  // cut short by a crash
  pos_ += kFrameHeaderSize;
  type = static_cast<StreamType>(raw);
  length = pending_ = len;
  return true;
}

std::string_view FrameReader::data() {
  const uint32_t len = pending_;
  pending_ = 0;
  if (!fill(len)) return {};
  std::string_view out(buf_.data() + (pos_ - buf_pos_), len);
  pos_ += len;
  return out;
}

void FrameReader::skip() {
  pos_ += pending_;
  pending_ = 0;
}

std::optional<SegmentHeader> FrameReader::read_header(int fd) {
  char raw[kSegmentHeaderSize];
  ssize_t r;
  do {
    r = ::pread(fd, raw, sizeof raw, 0);
  } while (r < 0 && errno == EINTR);
  if (r != static_cast<ssize_t>(sizeof raw)) return std::nullopt;
  if (std::string_view(raw, kMagic.size()) != kMagic) return std::nullopt;
  return SegmentHeader{get<uint64_t>(raw + 8), get<uint64_t>(raw + 16)};
}

std::optional<SegmentInfo> load_segment(const std::string& file, int slot) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  const auto header = FrameReader::read_header(fd.get());
  if (!header) return std::nullopt;
  SegmentInfo s;
  s.slot = slot;
  s.base = s.end = header->base;
  s.cap = header->cap;
  s.index.push_back({s.base, kSegmentHeaderSize});
  FrameReader reader(fd.get(), kSegmentHeaderSize);
  StreamType type;
  uint32_t len;
  uint64_t frame_pos = kSegmentHeaderSize;
  while (reader.next(type, len)) {
    if (s.end - s.index.back().offset >= kIndexStride) s.index.push_back({s.end, frame_pos});
    reader.skip();
    s.end += len;
    frame_pos = reader.position();
  }
  s.file_size = frame_pos;
  return s;
}

}  // namespace agentbox::exec
