#include "fs/grep_search.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <re2/re2.h>
#include <sys/stat.h>

#include <memory>

#include "fs/content_type.hpp"
#include "fs/file_read.hpp"
#include "fs/fs_error.hpp"
#include "fs/utf8.hpp"

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

class Search {
 public:
  Search(const GrepOptions& opt, GrepResult& out) : opt_(opt), re_(compile(opt)), out_(out) {}

  // Searches the open regular file `fd` shown as `shown`. Returns false once the results are
  // complete (one match past max_results was seen).
  bool file(int fd, const std::string& shown) {
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) > opt_.max_file_bytes)
      return true;
    std::string text;
    try {
      read_up_to(fd, text, opt_.max_file_bytes, shown);
    } catch (const Error&) {
      return true;  // unreadable: skipped, as Open Terminal does
    }
    if (looks_binary(text, text.size() < kSniffBytes)) return true;
    std::string_view rest = text;
    for (uint64_t line = 1; !rest.empty(); ++line) {
      size_t nl = rest.find('\n');
      std::string_view l = rest.substr(0, nl);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      if (l.ends_with('\r')) l.remove_suffix(1);
      if (!RE2::PartialMatch(l, *re_)) continue;
      if (!add(shown, line, l)) return false;
      if (!opt_.match_per_line) break;
    }
    return true;
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

  const GrepOptions& opt_;
  std::unique_ptr<RE2> re_;
  GrepResult& out_;
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
