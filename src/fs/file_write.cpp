#include "fs/file_write.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "fs/atomic_file.hpp"
#include "fs/content_type.hpp"
#include "fs/file_read.hpp"
#include "fs/fs_error.hpp"
#include "util/utf8.hpp"

namespace agentbox {
namespace {

// Writes under the account's identity, which the caller holds.
WriteResult replace_file(const ConfinedDir& home, const HomePath& p, std::string_view content) {
  AtomicFile file(home.write_target(p), p.shown);
  file.write(content);
  file.commit();
  return WriteResult{p.shown, file.size()};
}

std::string read_whole_text(const ConfinedDir& home, const HomePath& p, uint64_t max_bytes) {
  struct stat st;
  UniqueFd fd = open_regular_file(home, p, st);
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw FsError(FsErrorKind::too_large, "File too large to edit: " + p.shown);
  std::string text;
  read_up_to(fd.get(), text, max_bytes + 1, p.shown);
  if (text.size() > max_bytes) throw FsError(FsErrorKind::too_large, "File too large to edit: " + p.shown);
  if (looks_binary(text, true)) throw_unsupported_binary(p, text.size());
  return text;
}

size_t count_occurrences(std::string_view hay, std::string_view needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string_view::npos; at = hay.find(needle, at + needle.size())) ++n;
  return n;
}

std::string replace_all(std::string_view hay, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t at = hay.find(from); at != std::string_view::npos; at = hay.find(from, pos)) {
    out.append(hay.substr(pos, at - pos));
    out.append(to);
    pos = at + from.size();
  }
  out.append(hay.substr(pos));
  return out;
}

// Byte offset where 1-based `line` starts ('\n'-separated); text.size() past the end.
size_t line_offset(std::string_view text, uint64_t line) {
  size_t pos = 0;
  for (uint64_t l = 1; l < line && pos < text.size(); ++l) {
    size_t nl = text.find('\n', pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  return pos;
}

void apply(std::string& content, const Replacement& r) {
  if (r.target.empty()) throw FsError(FsErrorKind::bad_request, "Target string is empty");
  if ((r.start_line && *r.start_line == 0) || (r.end_line && *r.end_line == 0))
    throw FsError(FsErrorKind::bad_request, "Line numbers start at 1");
  // The region searched: the whole text, or lines [start, end] as Open Terminal slices them.
  size_t begin = 0, end = content.size();
  if (r.start_line || r.end_line) {
    begin = line_offset(content, r.start_line.value_or(1));
    if (r.end_line) end = std::max(begin, line_offset(content, *r.end_line + 1));
  }
  std::string_view region = std::string_view(content).substr(begin, end - begin);
  size_t count = count_occurrences(region, r.target);
  if (count == 0) {
    std::string_view head(r.target);
    head = head.substr(0, utf8_prefix_of_chars(head, 100));
    throw FsError(FsErrorKind::bad_request, "Target string not found: " + python_repr(head));
  }
  if (count > 1 && !r.allow_multiple)
    throw FsError(FsErrorKind::bad_request,
                  "Found " + std::to_string(count) + " occurrences of target string but allow_multiple is false");
  content = content.substr(0, begin) + replace_all(region, r.target, r.replacement) + content.substr(end);
}

}  // namespace

std::string python_repr(std::string_view s) {
  // Python picks double quotes only when the text has a single quote and no double quote.
  const bool has_single = s.find('\'') != std::string_view::npos;
  const char quote = has_single && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (ch == quote) {
          out += '\\';
          out += ch;
        } else if (c < 0x20 || c == 0x7f) {
          char hex[5];
          std::snprintf(hex, sizeof hex, "\\x%02x", c);
          out += hex;
        } else {
          out += ch;
        }
    }
  }
  out += quote;
  return out;
}

WriteResult write_atomic(const ConfinedDir& home, const HomePath& p, std::string_view content, bool create_parents) {
  if (p.is_home()) throw_fs_errno(EISDIR, p.shown);
  auto as_user = home.as_user();
  if (create_parents) home.make_dirs(p.parent(home.box_home()));
  return replace_file(home, p, content);
}

WriteResult replace_in_file(const ConfinedDir& home, const HomePath& p, const std::vector<Replacement>& replacements,
                            uint64_t max_bytes) {
  auto as_user = home.as_user();
  std::string content = read_whole_text(home, p, max_bytes);
  for (const auto& r : replacements) apply(content, r);
  return replace_file(home, p, content);
}

}  // namespace agentbox
