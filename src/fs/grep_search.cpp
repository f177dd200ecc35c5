#include "fs/grep_search.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "fs/content_type.hpp"
#include "fs/fs_error.hpp"
#include "util/utf8.hpp"

namespace agentbox {
namespace {

std::unique_ptr<RE2> compile(const GrepOptions& opt) {
  RE2::Options o;
  o.set_literal(!opt.regex);
  o.set_case_sensitive(!opt.case_insensitive);
  o.set_log_errors(false);
  auto re = std::make_unique<RE2>(opt.query, o);
  if (!re->ok()) throw FsError(FsErrorKind::bad_request, "Invalid regex: " + re->error());
  return re;
}

// True when the file has a hole (reads as zeros that take no disk) before its end. A
// filesystem without SEEK_HOLE support reports the end of the file, so its files are read.
bool has_hole(int fd, off_t size) {
  off_t hole = ::lseek(fd, 0, SEEK_HOLE);
  return hole >= 0 && hole < size;
}

// The lines of a file fed block by block, each without its "\n" or "\r\n". A line that ends in
// the block it started in is handed on from the block itself; one that spans blocks is gathered
// in carry_. Only a line's first `max` bytes are kept either way, so memory is bounded by one
// block plus `max`.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max) : max_(std::max<size_t>(max, 1)) {}

  // Calls on_line(number, line) for each line `block` ends; stops and returns false as soon as
  // on_line does.
  template <class OnLine>
  bool feed(std::string_view block, OnLine& on_line) {
    for (size_t nl; (nl = block.find('\n')) != std::string_view::npos;) {
      if (!end_line(block.substr(0, nl), on_line)) return false;
      block.remove_prefix(nl + 1);
    }
    keep(block);
    return true;
  }

  // The last line, when the file does not end with "\n" (as before: "a\n" is one line).
  template <class OnLine>
  void finish(OnLine& on_line) {
    if (!carry_.empty()) end_line({}, on_line);
  }

 private:
  // Adds to carry_ a piece of a line that goes on in the next block.
  void keep(std::string_view piece) {
    size_t room = max_ - carry_.size();
    if (piece.size() > room) cut_ = true;
    carry_.append(piece.substr(0, room));
  }

  template <class OnLine>
  bool end_line(std::string_view last_piece, OnLine& on_line) {
    std::string_view line = last_piece;
    bool cut = false;
    if (!carry_.empty()) {
      keep(last_piece);
      line = carry_;
      cut = cut_;
    } else if (line.size() > max_) {
      line = line.substr(0, max_);
      cut = true;
    }
    // A cut line's '\r' is in the part dropped, if it has one.
    if (!cut && line.ends_with('\r')) line.remove_suffix(1);
    bool more = on_line(number_++, line);
    carry_.clear();
    cut_ = false;
    return more;
  }

  const size_t max_;
  std::string carry_;  // the start of a line the last block did not end: at most max_ bytes
  bool cut_ = false;   // carry_'s line had bytes past max_
  uint64_t number_ = 1;
};

class Search {
 public:
  Search(const GrepOptions& opt, GrepResult& out) : opt_(opt), re_(compile(opt)), out_(out), block_(kGrepBlockBytes) {}

  // Searches the open regular file `fd` shown as `shown`. Returns false once the results are
  // complete (one match past max_results was seen).
  bool file(int fd, const std::string& shown) {
    // Decided from the inode alone: a big or sparse file costs no reading.
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > opt_.max_file_bytes ||
        has_hole(fd, st.st_size))
      return true;
    bool complete = false;
    auto on_line = [&](uint64_t number, std::string_view line) {
      if (!RE2::PartialMatch(line, *re_)) return true;
      complete = !add(shown, number, line);
      return !complete && opt_.match_per_line;  // false: this file is done
    };
    LineSplitter lines(opt_.max_scanned_line_bytes);
    // Up to max_file_bytes, as before: the file may have grown since fstat.
    for (uint64_t offset = 0; offset < opt_.max_file_bytes;) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(block_.size(), opt_.max_file_bytes - offset));
      std::optional<size_t> got = read_block(fd, offset, want);
      if (!got) return true;  // unreadable: the rest is skipped, as Open Terminal skips such files
      std::string_view data(block_.data(), *got);
      if (offset == 0 && looks_binary(data, data.size() < kSniffBytes)) return true;
      if (!lines.feed(data, on_line)) return !complete;
      offset += *got;
      if (*got < want) break;  // end of file
    }
    lines.finish(on_line);
    return !complete;
  }

 private:
  bool add(const std::string& shown, uint64_t line, std::string_view l) {
    if (out_.matches.size() == static_cast<size_t>(opt_.max_results)) {
      out_.truncated = true;
      return false;
    }
    GrepMatch m{shown, 0, {}};
    if (opt_.match_per_line) {
      m.line = line;
      m.content = to_valid_utf8(l.substr(0, utf8_cut(l, opt_.max_line_bytes)));
    }
    out_.matches.push_back(std::move(m));
    return true;
  }

  // Reads `want` bytes at `offset` into block_, fewer only at the end of the file; nullopt when
  // the read fails.
  std::optional<size_t> read_block(int fd, uint64_t offset, size_t want) {
    size_t got = 0;
    while (got < want) {
      ssize_t n = ::pread(fd, block_.data() + got, want - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return std::nullopt;
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    return got;
  }

  const GrepOptions& opt_;
  std::unique_ptr<RE2> re_;
  GrepResult& out_;
  std::vector<char> block_;  // one block of the file being searched, reused for every file
};

bool included(const GrepOptions& opt, const std::string& name) {
  if (opt.include.empty()) return true;
  for (const auto& g : opt.include)
    if (::fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace

GrepResult grep_files(const ConfinedDir& home, const HomePath& p, const GrepOptions& opt) {
  check_max_results(opt.max_results);
  GrepResult out{opt.query, p.shown, {}, false};
  Search search(opt, out);
  auto as_user = home.as_user();
  // O_NONBLOCK: the path may name a FIFO. A directory opens too (O_RDONLY).
  UniqueFd root = when_missing(FsErrorKind::not_found, "Search path not found", p.shown,
                               [&] { return home.open(p, O_RDONLY | O_NOCTTY | O_NONBLOCK); });
  struct stat st;
  fs_check(::fstat(root.get(), &st), p.shown);
  if (!S_ISDIR(st.st_mode)) {
    search.file(root.get(), p.shown);
    return out;
  }
  // Files in a directory come before its subdirectories (walk order), each in name order.
  bool complete = walk_tree(root.get(), p.shown, opt.limits, [&](const WalkEntry& w) {
    if (w.type != DT_REG || !included(opt, w.entry.name)) return Visit::next;
    UniqueFd fd = open_in_dir(w.dirfd, w.entry.name, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (!fd) return Visit::next;
    return search.file(fd.get(), p.child(w.rel).shown) ? Visit::next : Visit::stop;
  });
  if (!complete) out.truncated = true;
  return out;
}

}  // namespace agentbox
