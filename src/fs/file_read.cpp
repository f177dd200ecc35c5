#include "fs/file_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "fs/content_type.hpp"
#include "fs/dir_entries.hpp"
#include "fs/fs_error.hpp"
#include "fs/text_encoding.hpp"
#include "util/utf8.hpp"

namespace agentbox {
namespace {

[[noreturn]] void file_not_found(const HomePath& p, int err) {
  throw FsError(FsErrorKind::not_found, "File not found: " + p.shown, err);
}

// Reads up to `max` bytes more into `out`; returns how many (0 at end of file).
size_t read_some(int fd, std::string& out, size_t max, std::string_view shown) {
  size_t old = out.size();
  out.resize(old + max);
  ssize_t n;
  do n = ::read(fd, out.data() + old, max);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    int err = errno;
    out.resize(old);
    throw_fs_errno(err, shown);
  }
  out.resize(old + static_cast<size_t>(n));
  return static_cast<size_t>(n);
}

// Collects the lines [first, last] of a stream fed piece by piece, within a byte budget.
class LineCollector {
 public:
  // first_column: 1-based byte position in the first line where the content starts.
  LineCollector(uint64_t first, uint64_t first_column, uint64_t last, size_t budget)
      : first_(first), last_(last), budget_(budget), skip_(first_column - 1), column_base_(first_column - 1) {}

  void feed(std::string_view data) {
    while (!data.empty()) {
      if (line_ == first_ && skip_ > 0) {
        // The part of the first line an earlier answer already gave (it may span chunks).
        const size_t nl = data.find('\n');
        const size_t n =
            static_cast<size_t>(std::min<uint64_t>(skip_, nl == std::string_view::npos ? data.size() : nl));
        data.remove_prefix(n);
        skip_ -= n;
        if (n > 0) {
          any_ = true;
          ends_with_newline_ = false;
        }
        if (skip_ > 0 && nl == std::string_view::npos) return;  // more of the line to pass over
        skip_ = 0;                                              // reached, or the line ended first
        landing_ = true;                                        // begin on a character, not inside one
        continue;
      }
      if (landing_) {
        while (!data.empty() && (static_cast<unsigned char>(data[0]) & 0xC0) == 0x80) {
          data.remove_prefix(1);
          ++column_base_;
        }
        if (data.empty()) return;
        landing_ = false;
      }
      size_t nl = data.find('\n');
      size_t take = nl == std::string_view::npos ? data.size() : nl + 1;
      if (line_ >= first_ && line_ <= last_ && !full_) add(data.substr(0, take));
      ends_with_newline_ = data[take - 1] == '\n';
      if (nl != std::string_view::npos) end_line();
      data.remove_prefix(take);
      any_ = true;
    }
  }

  void finish(ReadResult& r) {
    if (!ends_with_newline_ && any_) end_line();
    r.total_lines = line_ - 1;
    r.content = to_valid_utf8(content_);
    r.truncated = full_;
    r.next_line = full_ ? next_line_ : 0;
    r.next_column = full_ ? next_column_ : 0;
  }

 private:
  void add(std::string_view piece) {
    // Keep at most budget+1 bytes of a line: enough to know it does not fit.
    size_t room = budget_ + 1 > pending_.size() ? budget_ + 1 - pending_.size() : 0;
    pending_.append(piece.substr(0, room));
  }
  // Called at each line end: the pending line goes in whole if it fits; the first line of the
  // range goes in cut if it alone is over the budget.
  void end_line() {
    if (line_ >= first_ && line_ <= last_ && !full_) {
      if (content_.size() + pending_.size() <= budget_) {
        content_ += pending_;
      } else {
        full_ = true;
        next_line_ = line_;
        if (content_.empty()) {
          // One line over the whole budget: its first piece now, the rest from next_column on.
          content_ = pending_.substr(0, utf8_cut(pending_, budget_));
          next_column_ = (line_ == first_ ? column_base_ : 0) + content_.size() + 1;
        } else if (line_ == first_) {
          next_column_ = column_base_ + 1;
        }
      }
      pending_.clear();
    }
    ++line_;
  }

  uint64_t first_, last_;
  size_t budget_;
  uint64_t skip_;         // bytes of the first line still to pass over
  uint64_t column_base_;  // where in the first line the content starts, 0-based
  bool landing_ = false;  // just past the skipped part: continuation bytes are passed over
  uint64_t line_ = 1;     // number of the line being read
  std::string pending_, content_;
  bool full_ = false, ends_with_newline_ = true, any_ = false;
  uint64_t next_line_ = 0, next_column_ = 0;
};

}  // namespace

// O_NONBLOCK so a FIFO planted in the home cannot hang the worker; it is cleared again once
// the file is known to be regular.
UniqueFd open_regular_file(const ConfinedDir& home, const HomePath& p, struct stat& st) {
  UniqueFd fd = when_missing(FsErrorKind::not_found, "File not found", p.shown,
                             [&] { return home.open(p, O_RDONLY | O_NOCTTY | O_NONBLOCK); });
  fs_check(::fstat(fd.get(), &st), p.shown);
  if (!S_ISREG(st.st_mode)) file_not_found(p, S_ISDIR(st.st_mode) ? EISDIR : EINVAL);
  fs_check(::fcntl(fd.get(), F_SETFL, 0), p.shown);
  return fd;
}

void throw_unsupported_binary(const HomePath& p, uint64_t size) {
  throw FsError(FsErrorKind::unsupported_media,
                "Unsupported binary file type: " + std::string(content_type_for(p.name())) + " (" +
                    std::to_string(size) + " bytes)");
}

void read_up_to(int fd, std::string& out, size_t want, std::string_view shown) {
  while (out.size() < want && read_some(fd, out, want - out.size(), shown) > 0) {
  }
}

ReadResult read_text(const ConfinedDir& home, const HomePath& p, const ReadOptions& opt) {
  if ((opt.start_line && *opt.start_line == 0) || (opt.end_line && *opt.end_line == 0))
    throw FsError(FsErrorKind::bad_request, "Line numbers start at 1");
  auto as_user = home.as_user();
  struct stat st;
  UniqueFd fd = open_regular_file(home, p, st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);

  ReadResult r;
  r.path = p.shown;
  std::string head;
  read_up_to(fd.get(), head, kSniffBytes, p.shown);
  const TextEncoding encoding = sniff_text_encoding(head, head.size() < kSniffBytes);
  if (encoding == TextEncoding::binary) {
    auto image = sniff_image(head);
    if (!image) throw_unsupported_binary(p, size);
    if (size > opt.max_image_bytes)
      throw FsError(FsErrorKind::too_large,
                    "Image too large to read: " + p.shown + " (" + std::to_string(size) + " bytes)");
    r.kind = ReadResult::Kind::image;
    r.mime = *image;
    r.bytes = std::move(head);
    read_up_to(fd.get(), r.bytes, opt.max_image_bytes + 1, p.shown);
    if (r.bytes.size() > opt.max_image_bytes)  // it grew while we read
      throw FsError(FsErrorKind::too_large, "Image too large to read: " + p.shown);
    return r;
  }
  if (size > opt.max_text_bytes)
    throw FsError(FsErrorKind::too_large, "File too large to read (" + std::to_string(size) + " bytes, limit " +
                                              std::to_string(opt.max_text_bytes) +
                                              "): use run_command with head, tail, sed or grep on " + p.shown);

  if (opt.start_column && *opt.start_column == 0) throw FsError(FsErrorKind::bad_request, "Columns start at 1");
  LineCollector lines(opt.start_line.value_or(1), opt.start_column.value_or(1), opt.end_line.value_or(UINT64_MAX),
                      opt.byte_budget);
  // Single-byte text is decoded byte by byte, so the lines and columns are those of its UTF-8.
  const bool decode = encoding == TextEncoding::single_byte;
  r.encoding = decode ? "windows-1252" : "utf-8";
  lines.feed(decode ? cp1252_to_utf8(head) : head);
  std::string chunk;
  uint64_t seen = head.size();
  while (seen <= opt.max_text_bytes) {
    chunk.clear();
    if (read_some(fd.get(), chunk, 64 << 10, p.shown) == 0) break;
    seen += chunk.size();
    lines.feed(decode ? cp1252_to_utf8(chunk) : chunk);
  }
  lines.finish(r);
  return r;
}

FileStream open_for_read(const ConfinedDir& home, const HomePath& p) {
  auto as_user = home.as_user();
  struct stat st;
  FileStream out;
  out.fd = open_regular_file(home, p, st);
  out.path = p.shown;
  out.size = static_cast<uint64_t>(st.st_size);
  out.modified = mtime_seconds(st);
  out.content_type = content_type_for(p.name());
  return out;
}

bool is_regular_file(const ConfinedDir& home, const HomePath& p) {
  auto as_user = home.as_user();
  try {
    UniqueFd fd = home.open(p, O_PATH);
    struct stat st;
    return ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode);
  } catch (const FsError&) {
    return false;
  }
}

}  // namespace agentbox
