#include "fs/glob_search.hpp"

#include <fcntl.h>

#include "fs/fs_error.hpp"
#include "fs/glob_pattern.hpp"

namespace agentbox {

GlobResult glob_files(const ConfinedDir& home, const HomePath& dir, const GlobOptions& opt) {
  check_max_results(opt.max_results);
  if (opt.pattern.empty()) throw FsError(FsErrorKind::bad_request, "Pattern is empty");
  const GlobPattern pattern(opt.pattern);
  std::vector<GlobPattern> exclude(opt.exclude.begin(), opt.exclude.end());
  auto excluded = [&](std::string_view rel) {
    for (const auto& e : exclude)
      if (e.matches(rel)) return true;
    return false;
  };

  auto as_user = home.as_user();
  UniqueFd fd = when_missing(FsErrorKind::not_found, "Search directory not found", dir.shown,
                             [&] { return home.open(dir, O_PATH | O_DIRECTORY); });
  GlobResult out{opt.pattern, dir.shown, {}, false};
  bool complete = walk_tree(fd.get(), dir.shown, opt.limits, [&](const WalkEntry& w) {
    if (excluded(w.rel)) return Visit::prune;
    if (!pattern.matches(w.rel)) return Visit::next;
    EntryInfo info;
    if (!describe_entry(home, w.dirfd, w.entry.name, dir.child(w.rel), info)) return Visit::next;
    if ((opt.type == GlobType::file && info.type != "file") ||
        (opt.type == GlobType::directory && info.type != "directory"))
      return Visit::next;
    if (out.matches.size() == static_cast<size_t>(opt.max_results)) {
      out.truncated = true;  // one more than asked for: there is more
      return Visit::stop;
    }
    out.matches.push_back(GlobMatch{std::string(w.rel), info.type, info.size, info.modified});
    return Visit::next;
  });
  if (!complete) out.truncated = true;
  return out;
}

}  // namespace agentbox
