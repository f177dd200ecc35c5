#include "exec/output_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>

#include "util/error.hpp"
#include "util/utf8.hpp"

namespace agentbox::exec {
namespace {

constexpr int kSlots = 3;                   // segment files per log: two full ones + the newest
constexpr uint64_t kTailWindow = 64 << 10;  // bytes examined per step when counting lines back

// Writes all of both buffers; false on any failure (the caller stops using the disk).
bool write_frame_fully(int fd, std::string_view header, std::string_view data) {
  iovec iov[2] = {{const_cast<char*>(header.data()), header.size()}, {const_cast<char*>(data.data()), data.size()}};
  size_t left = header.size() + data.size();
  int first = 0;
  while (left > 0) {
    const ssize_t n = ::writev(fd, iov + first, 2 - first);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    auto done = static_cast<size_t>(n);
    left -= done;
    while (first < 2 && done >= iov[first].iov_len) done -= iov[first++].iov_len;
    if (first < 2) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + done;
      iov[first].iov_len -= done;
    }
  }
  return true;
}

void add_chunk(std::vector<LogChunk>& out, StreamType type, std::string_view data) {
  if (data.empty()) return;
  if (!out.empty() && out.back().type == type) {
    out.back().data.append(data);
  } else {
    out.push_back({type, std::string(data)});
  }
}

}  // namespace

OutputLog::OutputLog(std::string path, uint64_t cap, size_t memory_tail)
    : path_(std::move(path)),
      cap_(std::max<uint64_t>(cap, 2)),
      segment_size_(cap_ / 2),
      tail_cap_(static_cast<size_t>(std::min<uint64_t>(memory_tail, cap_))) {}

std::string OutputLog::segment_file(int slot) const { return path_ + "." + std::to_string(slot); }

std::unique_ptr<OutputLog> OutputLog::create(const std::string& path, uint64_t cap, size_t memory_tail) {
  std::unique_ptr<OutputLog> log(new OutputLog(path, cap, memory_tail));
  // The first segment file is made with the first output (start_first_segment): a command
  // that prints nothing costs no file. Checked here all the same, so an id in use is refused.
  const std::string file = log->segment_file(0);
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) throw Error("open(" + file + "): File exists", EEXIST);
  SegmentInfo s;
  s.slot = 0;
  s.cap = log->cap_;
  s.file_size = kSegmentHeaderSize;
  s.index.push_back({0, kSegmentHeaderSize});
  log->segments_.push_back(std::move(s));
  log->writable_ = true;
  return log;
}

std::unique_ptr<OutputLog> OutputLog::open(const std::string& path) {
  std::vector<SegmentInfo> found;
  for (int slot = 0; slot < kSlots; ++slot)
    if (auto s = load_segment(path + "." + std::to_string(slot), slot)) found.push_back(std::move(*s));
  if (found.empty()) throw Error("open output log " + path + ": no segment file", ENOENT);
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.base < b.base; });
  // Only the newest contiguous run of segments is the log (a crash during rotation can
  // leave a stale one behind).
  size_t first = found.size() - 1;
  while (first > 0 && found[first - 1].end == found[first].base) --first;

  std::unique_ptr<OutputLog> log(new OutputLog(path, found.back().cap, kMemoryTail));
  for (size_t i = first; i < found.size(); ++i) log->segments_.push_back(std::move(found[i]));
  log->end_ = log->tail_begin_ = log->segments_.back().end;
  return log;
}

void OutputLog::remove(const std::string& path) {
  for (int slot = 0; slot < kSlots; ++slot) ::unlink((path + "." + std::to_string(slot)).c_str());
}

void OutputLog::append(StreamType type, std::string_view data) {
  std::lock_guard lock(mu_);
  if (!writable_ || data.empty()) return;
  std::string& held = held_[static_cast<size_t>(type)];
  std::string joined;
  if (!held.empty()) {
    joined = std::move(held);
    joined.append(data);
    held.clear();
    data = joined;
  }
  const size_t unfinished = utf8_unfinished_tail(data);
  held.assign(data.substr(data.size() - unfinished));
  data.remove_suffix(unfinished);
  commit(type, data);
}

bool OutputLog::finish() {
  std::lock_guard lock(mu_);
  if (!writable_) return missed_locked();
  for (size_t t = 0; t < kStreamTypes; ++t) {
    commit(static_cast<StreamType>(t), held_[t]);
    held_[t].clear();
  }
  if (!disk_ok_) resume_disk(/*now=*/true);
  writable_ = false;
  writer_.reset();
  tail_.shrink_to_fit();
  return missed_locked();
}

bool OutputLog::write_missed() {
  std::lock_guard lock(mu_);
  if (!disk_ok_ && !abandoned_) {
    resume_disk(/*now=*/true);
    if (!writable_) writer_.reset();
  }
  return missed_locked();
}

void OutputLog::abandon() {
  std::lock_guard lock(mu_);
  abandoned_ = true;
}

bool OutputLog::missed_locked() const {
  const uint64_t on_disk = segments_.back().end;
  return !disk_ok_ && !abandoned_ && on_disk < end_ && on_disk >= tail_begin_;
}

// Writes data to the segments, a frame at a time; stops at the first write the disk refuses.
void OutputLog::persist(StreamType type, std::string_view data) {
  while (!data.empty() && disk_ok_) {
    // Frames do not cross segment ends, so no segment outgrows cap/2.
    if (segments_.back().end - segments_.back().base >= segment_size_) rotate();
    if (!disk_ok_) return;
    const uint64_t fill = segments_.back().end - segments_.back().base;
    const auto room =
        static_cast<size_t>(std::min<uint64_t>(kMaxFrameData, segment_size_ - std::min(fill, segment_size_ - 1)));
    const std::string_view piece = data.substr(0, room);
    data.remove_prefix(piece.size());
    write_frame(type, piece);
  }
}

// Takes the disk back after a failed write: the newest segment loses whatever that write left
// past its last whole frame (or is started again, header first, if it holds none), then gets
// the bytes it missed from the memory tail. At most once a second unless `now`.
void OutputLog::resume_disk(bool now) {
  const auto t = std::chrono::steady_clock::now();
  if (!missed_locked() || (!now && t < next_disk_try_)) return;
  next_disk_try_ = t + std::chrono::seconds(1);
  const SegmentInfo& s = segments_.back();
  UniqueFd fd(::open(segment_file(s.slot).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  const bool fresh = s.end == s.base;
  if (!fd || ::ftruncate(fd.get(), fresh ? 0 : static_cast<off_t>(s.file_size)) != 0) return;
  if (fresh && !write_frame_fully(fd.get(), encode_segment_header({s.base, cap_}), {})) return;
  writer_ = std::move(fd);
  disk_ok_ = true;
  std::vector<LogChunk> missed;
  collect(s.end, end_, missed);
  for (const LogChunk& c : missed) persist(c.type, c.data);
}

// The disk first (what it refuses is written later, from the tail), then the memory tail.
void OutputLog::commit(StreamType type, std::string_view data) {
  if (data.empty()) return;
  if (!disk_ok_) resume_disk(/*now=*/false);
  persist(type, data);
  remember(type, data);
  end_ += data.size();
}

bool OutputLog::start_first_segment() {
  const std::string file = segment_file(0);
  writer_.reset(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600));
  if (writer_ && write_frame_fully(writer_.get(), encode_segment_header({0, cap_}), {})) return true;
  writer_.reset();
  return false;
}

void OutputLog::write_frame(StreamType type, std::string_view data) {
  if (!writer_ && !start_first_segment()) {
    disk_ok_ = false;
    return;
  }
  SegmentInfo& s = segments_.back();
  if (s.end - s.index.back().offset >= kIndexStride) s.index.push_back({s.end, s.file_size});
  if (!write_frame_fully(writer_.get(), encode_frame_header(type, static_cast<uint32_t>(data.size())), data)) {
    disk_ok_ = false;
    writer_.reset();
    return;
  }
  s.file_size += kFrameHeaderSize + data.size();
  s.end += data.size();
}

void OutputLog::rotate() {
  // The new segment takes the slot of the oldest one, which is then no longer needed: the
  // two remaining full segments hold at least cap bytes. It starts where the disk's bytes end
  // (end_ too, but while missed output is written again from the tail).
  const uint64_t base = segments_.back().end;
  const int slot = (segments_.back().slot + 1) % kSlots;
  if (segments_.size() == kSlots) segments_.pop_front();
  const std::string file = segment_file(slot);
  writer_.reset(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600));
  if (!writer_ || !write_frame_fully(writer_.get(), encode_segment_header({base, cap_}), {})) {
    disk_ok_ = false;
    writer_.reset();
    return;
  }
  SegmentInfo s;
  s.slot = slot;
  s.base = s.end = base;
  s.cap = cap_;
  s.file_size = kSegmentHeaderSize;
  s.index.push_back({base, kSegmentHeaderSize});
  segments_.push_back(std::move(s));
}

void OutputLog::remember(StreamType type, std::string_view data) {
  if (runs_.empty() || runs_.back().type != type) runs_.push_back({end_, type});
  tail_.append(data);
  // Trimmed in steps, not per append, so the front is not moved on every small write.
  if (tail_.size() > tail_cap_ + tail_cap_ / 4) {
    const size_t drop = tail_.size() - tail_cap_;
    tail_.erase(0, drop);
    tail_begin_ += drop;
    while (runs_.size() > 1 && runs_[1].offset <= tail_begin_) runs_.pop_front();
  }
}

uint64_t OutputLog::begin_locked() const {
  uint64_t begin = disk_ok_ ? segments_.front().base : tail_begin_;
  if (end_ > cap_) begin = std::max(begin, end_ - cap_);
  return begin;
}

uint64_t OutputLog::end_offset() const {
  std::lock_guard lock(mu_);
  return readable_end_locked();
}

uint64_t OutputLog::begin_offset() const {
  std::lock_guard lock(mu_);
  return begin_locked();
}

void OutputLog::collect(uint64_t from, uint64_t to, std::vector<LogChunk>& out) const {
  if (from >= to) return;
  if (from < tail_begin_) {
    collect_from_disk(from, to, out);
    return;
  }
  for (size_t i = 0; i < runs_.size(); ++i) {
    const uint64_t run_begin = std::max(runs_[i].offset, tail_begin_);
    const uint64_t run_end = i + 1 < runs_.size() ? runs_[i + 1].offset : end_;
    const uint64_t a = std::max(run_begin, from), b = std::min(run_end, to);
    if (a < b) add_chunk(out, runs_[i].type, std::string_view(tail_).substr(a - tail_begin_, b - a));
  }
}

void OutputLog::collect_from_disk(uint64_t from, uint64_t to, std::vector<LogChunk>& out) const {
  for (const SegmentInfo& s : segments_) {
    if (s.end <= from || s.base >= to) continue;
    UniqueFd fd(::open(segment_file(s.slot).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) continue;  // removed under us (purge): that part reads as nothing
    auto point = std::upper_bound(s.index.begin(), s.index.end(), from,
                                  [](uint64_t off, const IndexPoint& p) { return off < p.offset; });
    if (point != s.index.begin()) --point;
    FrameReader reader(fd.get(), point->file_pos);
    uint64_t off = point->offset;
    StreamType type;
    uint32_t len;
    while (off < std::min(to, s.end) && reader.next(type, len)) {
      const uint64_t frame_end = off + len;
      if (frame_end <= from) {
        reader.skip();
      } else {
        const std::string_view data = reader.data();
        if (data.size() != len) break;
        const uint64_t a = std::max(off, from), b = std::min(frame_end, to);
        add_chunk(out, type, data.substr(a - off, b - a));
      }
      off = frame_end;
    }
  }
}

uint64_t OutputLog::tail_start(uint64_t lo, uint64_t hi, uint64_t lines) const {
  if (lines == 0) return hi;
  uint64_t found = 0;
  for (uint64_t pos = hi; pos > lo;) {
    const uint64_t window_lo = pos - std::min(pos - lo, kTailWindow);
    std::vector<LogChunk> chunks;
    collect(window_lo, pos, chunks);
    std::string window;
    for (const auto& c : chunks) window += c.data;
    for (size_t i = window.size(); i-- > 0;) {
      const uint64_t at = window_lo + i;
      // A newline that ends the output ends the last line; it does not start another.
      if (window[i] != '\n' || at + 1 == hi) continue;
      if (++found == lines) return at + 1;
    }
    pos = window_lo;
  }
  return lo;
}

uint64_t OutputLog::readable_end_locked() const {
  // A '\r' at the very end of a log still written waits for what follows it: its '\n' may be
  // in the next piece of a terminal's output, and an answer must not end between the two.
  const bool held_cr = writable_ && !tail_.empty() && tail_.back() == '\r';
  return end_ - (held_cr ? 1 : 0);
}

LogRead OutputLog::read(uint64_t offset, size_t max_bytes, std::optional<uint64_t> tail_lines) const {
  std::lock_guard lock(mu_);
  LogRead r;
  const uint64_t end = readable_end_locked();
  uint64_t start = std::min(offset, end);
  bool cut_front = false;  // the answer starts where the reader did not ask: may be mid-character
  if (start < begin_locked()) {
    start = begin_locked();
    r.truncated = cut_front = true;
  }
  uint64_t stop = end;
  if (tail_lines) {
    const uint64_t from = tail_start(start, end, *tail_lines);
    if (from > start) {
      start = from;
      r.truncated = true;
      cut_front = false;  // just after a newline
    }
    if (end - start > max_bytes) {
      start = end - max_bytes;
      r.truncated = cut_front = true;
    }
  } else if (end - start > max_bytes) {
    stop = start + max_bytes;
  }
  collect(start, stop, r.chunks);

  if (cut_front && !r.chunks.empty()) {
    std::string& first = r.chunks.front().data;
    first.erase(0, utf8_orphan_head(first));
    if (first.empty()) r.chunks.erase(r.chunks.begin());
  }
  if (stop < end && !r.chunks.empty()) {
    // Cut by max_bytes: end after a newline when one is near, else on a character boundary and
    // outside a "\r\n"; never leave the answer empty.
    std::string& last = r.chunks.back().data;
    size_t keep = last.size();
    const size_t window_start = last.size() > kLineSnapBytes ? last.size() - kLineSnapBytes : 0;
    if (const size_t nl = last.rfind('\n'); nl != std::string::npos && nl >= window_start) {
      keep = nl + 1;
    } else {
      keep -= utf8_unfinished_tail(last);
      if (keep > 0 && last[keep - 1] == '\r') --keep;  // its '\n' is in the next answer: keep them together
    }
    if (keep > 0 || r.chunks.size() > 1) {
      stop -= last.size() - keep;
      last.resize(keep);
      if (last.empty()) r.chunks.pop_back();
    }
  }
  r.more = stop < end;
  r.next_offset = stop;
  return r;
}

}  // namespace agentbox::exec
