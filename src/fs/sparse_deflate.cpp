#include "fs/sparse_deflate.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "util/error.hpp"

namespace agentbox {

namespace {

constexpr int kMinRunShift = 12;  // 4 KiB: the smallest hole worth a flush
constexpr int kMaxRunShift = 20;  // 1 MiB: deflates to about 1 KiB
constexpr std::size_t kReadPiece = 256 * 1024;
constexpr std::size_t kOutPiece = 64 * 1024;
constexpr std::size_t kEnoughPending = 256 * 1024;  // a refill stops adding runs past this
constexpr int kLevel = Z_DEFAULT_COMPRESSION;       // 6, as gzip and Info-ZIP's zip
constexpr int kRawWindowBits = -15;                 // raw DEFLATE: zip adds its own framing
// Incompressible data: judged per MiB, stored when a MiB comes out at 90%+ (deflate holds back
// up to a few dozen KiB of output, so a MiB of random bytes reads ~97%), until a sample of a
// piece compresses below that again.
constexpr uLong kJudgeBytes = 1u << 20;
constexpr double kIncompressible = 0.9;
constexpr std::size_t kSampleBytes = 16 * 1024;
constexpr int kProbeWindowBits = -9, kProbeMemLevel = 1;  // the smallest zlib takes: cheap to reset

const std::array<char, (1u << kMinRunShift) - 1> kZeros{};  // a hole's remainder below 4 KiB

// Zero runs, made once: run(k) is 2^k zero bytes deflated by a fresh stream and full-flushed.
struct ZeroRun {
  std::string deflated;
  uLong crc;         // CRC-32 of the 2^k zeros
  uLong combine_op;  // crc32_combine_op's operator for a length of 2^k
};

class ZeroRuns {
 public:
  static const ZeroRun& run(int shift) {
    static const ZeroRuns runs;
    return runs.runs_[static_cast<std::size_t>(shift - kMinRunShift)];
  }

 private:
  ZeroRuns() {
    const std::vector<char> zeros(std::size_t{1} << kMaxRunShift, 0);
    for (int shift = kMinRunShift; shift <= kMaxRunShift; ++shift) {
      const std::size_t n = std::size_t{1} << shift;
      ZeroRun& r = runs_[static_cast<std::size_t>(shift - kMinRunShift)];
      z_stream zs{};
      if (deflateInit2(&zs, kLevel, Z_DEFLATED, kRawWindowBits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw Error("deflateInit2: out of memory");
      r.deflated.resize(deflateBound(&zs, n) + 16);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
      zs.avail_in = static_cast<uInt>(n);
      zs.next_out = reinterpret_cast<Bytef*>(r.deflated.data());
      zs.avail_out = static_cast<uInt>(r.deflated.size());
      const int rc = deflate(&zs, Z_FULL_FLUSH);
      const bool whole = rc == Z_OK && zs.avail_in == 0 && zs.avail_out > 0;
      r.deflated.resize(r.deflated.size() - zs.avail_out);
      deflateEnd(&zs);
      if (!whole) throw Error("deflate of a zero run did not complete");
      r.crc = crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(zeros.data()), static_cast<uInt>(n));
      r.combine_op = crc32_combine_gen(static_cast<z_off_t>(n));
    }
  }
  std::array<ZeroRun, kMaxRunShift - kMinRunShift + 1> runs_;
};

}  // namespace

SparseDeflater::SparseDeflater(int fd, std::uint64_t length)
    : fd_(fd), end_(length), crc_(crc32(0, nullptr, 0)), level_(kLevel) {
  struct stat st;
  check(::fstat(fd_, &st), "fstat");
  end_ = std::min<std::uint64_t>(end_, static_cast<std::uint64_t>(st.st_size));
  if (deflateInit2(&zs_, kLevel, Z_DEFLATED, kRawWindowBits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw Error("deflateInit2: out of memory", ENOMEM);
  if (deflateInit2(&probe_, 1, Z_DEFLATED, kProbeWindowBits, kProbeMemLevel, Z_DEFAULT_STRATEGY) != Z_OK) {
    deflateEnd(&zs_);
    throw Error("deflateInit2: out of memory", ENOMEM);
  }
  probe_out_.resize(deflateBound(&probe_, kSampleBytes));
  (void)ZeroRuns::run(kMinRunShift);  // made now, not in the middle of a stream
}

SparseDeflater::~SparseDeflater() {
  deflateEnd(&probe_);
  deflateEnd(&zs_);
}

std::size_t SparseDeflater::read(char* out, std::size_t room) {
  while (pending_pos_ == pending_.size() && !finished_) {
    pending_.clear();
    pending_pos_ = 0;
    refill();
  }
  const std::size_t n = std::min(room, pending_.size() - pending_pos_);
  std::copy_n(pending_.data() + pending_pos_, n, out);
  pending_pos_ += n;
  return n;
}

void SparseDeflater::refill() {
  if (hole_left_ > 0) return emit_hole();
  if (pos_ >= end_) {
    deflate_bytes(nullptr, 0, Z_FINISH);
    finished_ = true;
    return;
  }
  if (pos_ >= data_end_) return find_extent();
  if (in_.empty()) in_.resize(kReadPiece);
  const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(in_.size(), data_end_ - pos_));
  ssize_t n;
  do {
    n = ::pread(fd_, in_.data(), want, static_cast<off_t>(pos_));
  } while (n < 0 && errno == EINTR);
  if (n < 0) throw sys_error("pread");
  if (n == 0) {  // shorter than it was: the stream ends where the file does
    end_ = data_end_ = pos_;
    return;
  }
  crc_ = crc32(crc_, reinterpret_cast<const Bytef*>(in_.data()), static_cast<uInt>(n));
  deflate_bytes(in_.data(), static_cast<std::size_t>(n), Z_NO_FLUSH);
  pos_ += static_cast<std::uint64_t>(n);
  bytes_read_ += static_cast<std::uint64_t>(n);
  if (level_ == 0) bytes_stored_ += static_cast<std::uint64_t>(n);
  judge_compression(in_.data(), static_cast<std::size_t>(n));
}

void SparseDeflater::judge_compression(const char* data, std::size_t n) {
  if (level_ == 0) {
    if (sample_compresses(data, n)) set_level(kLevel);
    return;
  }
  const uLong in = zs_.total_in - window_in_;
  if (in < kJudgeBytes) return;
  const uLong out = zs_.total_out - window_out_;
  if (static_cast<double>(out) >= kIncompressible * static_cast<double>(in)) {
    set_level(0);
  } else {
    window_in_ = zs_.total_in;
    window_out_ = zs_.total_out;
  }
}

bool SparseDeflater::sample_compresses(const char* data, std::size_t n) {
  const std::size_t sample = std::min(n, kSampleBytes);
  if (sample == 0 || deflateReset(&probe_) != Z_OK) return false;
  probe_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  probe_.avail_in = static_cast<uInt>(sample);
  probe_.next_out = reinterpret_cast<Bytef*>(probe_out_.data());
  probe_.avail_out = static_cast<uInt>(probe_out_.size());
  if (deflate(&probe_, Z_FINISH) != Z_STREAM_END) return false;
  return static_cast<double>(probe_.total_out) < kIncompressible * static_cast<double>(sample);
}

void SparseDeflater::set_level(int level) {
  // What came in so far is deflated at the old level first (deflateParams would do it too, but
  // wants the room for it at hand).
  deflate_bytes(nullptr, 0, Z_BLOCK);
  const std::size_t before = pending_.size();
  pending_.resize(before + kOutPiece);
  zs_.next_out = reinterpret_cast<Bytef*>(pending_.data() + before);
  zs_.avail_out = static_cast<uInt>(kOutPiece);
  const int rc = deflateParams(&zs_, level, Z_DEFAULT_STRATEGY);
  pending_.resize(before + kOutPiece - zs_.avail_out);
  if (rc == Z_OK) level_ = level;  // else (no room after all): the old level stays, no harm
  window_in_ = zs_.total_in;
  window_out_ = zs_.total_out;
}

void SparseDeflater::find_extent() {
  off_t data = ::lseek(fd_, static_cast<off_t>(pos_), SEEK_DATA);
  if (data < 0) {
    if (errno == ENXIO) {  // no data from pos_ on: a hole up to the end
      hole_left_ = end_ - pos_;
      return;
    }
    if (errno != EINVAL && errno != EOPNOTSUPP) throw sys_error("lseek(SEEK_DATA)");
    data_end_ = end_;  // a filesystem without holes: all data
    return;
  }
  const auto data_at = std::min<std::uint64_t>(static_cast<std::uint64_t>(data), end_);
  if (data_at > pos_) {
    hole_left_ = data_at - pos_;
    return;
  }
  const off_t hole = ::lseek(fd_, static_cast<off_t>(pos_), SEEK_HOLE);
  data_end_ = hole < 0 ? end_ : std::min<std::uint64_t>(static_cast<std::uint64_t>(hole), end_);
  if (data_end_ <= pos_) end_ = data_end_ = pos_;  // it shrank under us
}

void SparseDeflater::emit_hole() {
  const std::uint64_t runs_part = hole_left_ & ~((std::uint64_t{1} << kMinRunShift) - 1);
  if (runs_part > 0) {
    // Flush what came before, so the runs start on a byte boundary and what follows them
    // refers to nothing before them.
    if (!flushed_) deflate_bytes(nullptr, 0, Z_FULL_FLUSH);
    flushed_ = true;
    std::uint64_t left = runs_part;
    while (left > 0 && pending_.size() < kEnoughPending) {
      int shift = kMaxRunShift;
      while ((std::uint64_t{1} << shift) > left) --shift;
      const ZeroRun& run = ZeroRuns::run(shift);
      pending_ += run.deflated;
      crc_ = crc32_combine_op(crc_, run.crc, run.combine_op);
      const std::uint64_t n = std::uint64_t{1} << shift;
      left -= n;
      pos_ += n;
      hole_left_ -= n;
    }
    if (left > 0) return;  // more in the next refill
  }
  const auto rest = static_cast<std::size_t>(hole_left_);  // below 4 KiB: as ordinary zeros
  if (rest > 0) {
    crc_ = crc32(crc_, reinterpret_cast<const Bytef*>(kZeros.data()), static_cast<uInt>(rest));
    deflate_bytes(kZeros.data(), rest, Z_NO_FLUSH);
    pos_ += rest;
    hole_left_ = 0;
  }
}

void SparseDeflater::deflate_bytes(const void* data, std::size_t n, int flush) {
  if (n > 0) flushed_ = false;
  zs_.next_in = static_cast<Bytef*>(const_cast<void*>(data));
  zs_.avail_in = static_cast<uInt>(n);
  for (;;) {
    const std::size_t before = pending_.size();
    pending_.resize(before + kOutPiece);
    zs_.next_out = reinterpret_cast<Bytef*>(pending_.data() + before);
    zs_.avail_out = static_cast<uInt>(kOutPiece);
    const int rc = deflate(&zs_, flush);
    pending_.resize(before + kOutPiece - zs_.avail_out);
    if (rc == Z_STREAM_ERROR) throw Error("deflate: inconsistent stream state");
    if (flush == Z_FINISH ? rc == Z_STREAM_END : zs_.avail_out > 0) break;
  }
}

}  // namespace agentbox
