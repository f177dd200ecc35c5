#include "box/uid_range_guard.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <memory>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/file_io.hpp"

namespace agentbox {
namespace {

std::optional<uint64_t> parse_id(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool in_span(const IdSpan& span, uint64_t id) { return id >= span.first && id <= span.last(); }

void add_unique(std::vector<HostId>& ids, HostId id) {
  auto same = [&](const HostId& h) { return h.kind == id.kind && h.name == id.name && h.id == id.id; };
  if (std::none_of(ids.begin(), ids.end(), same)) ids.push_back(std::move(id));
}

// Blocks until the flock is taken (a start waits for another's check, which is quick).
void lock_exclusive(int fd, const std::string& what) {
  while (::flock(fd, LOCK_EX) == -1) {
    if (errno != EINTR) throw sys_error("flock(" + what + ")");
  }
}

void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == -1 && errno != EEXIST) throw sys_error("mkdir(" + path + ")");
}

// "pid 123" and "state /x" from another daemon's file, for the refusal.
std::string describe_holder(int fd) {
  char buf[4096];
  ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  std::string_view text(buf, n > 0 ? static_cast<size_t>(n) : 0);
  std::string pid = "?", state = "?";
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (line.starts_with("pid ")) pid = line.substr(4);
    if (line.starts_with("state ")) state = line.substr(6);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  return fmt::format("pid {}, state dir {}", pid, state);
}

}  // namespace

bool overlaps(const IdSpan& a, const IdSpan& b) {
  return a.count > 0 && b.count > 0 && a.first <= b.last() && b.first <= a.last();
}

std::string span_text(const IdSpan& span) { return fmt::format("{}-{}", span.first, span.last()); }

std::optional<IdSpan> parse_span_text(std::string_view text) {
  size_t dash = text.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  std::optional<uint64_t> first = parse_id(text.substr(0, dash));
  std::optional<uint64_t> last = parse_id(text.substr(dash + 1));
  if (!first || !last || *last < *first) return std::nullopt;
  return IdSpan{*first, *last - *first + 1};
}

std::vector<SubidEntry> parse_subid_text(std::string_view text) {
  std::vector<SubidEntry> entries;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c1 == 0 || c2 == std::string_view::npos) continue;
    std::optional<uint64_t> start = parse_id(line.substr(c1 + 1, c2 - c1 - 1));
    std::optional<uint64_t> count = parse_id(line.substr(c2 + 1));
    if (!start || !count || *count == 0) continue;
    entries.push_back({std::string(line), IdSpan{*start, *count}});
  }
  return entries;
}

std::optional<std::string> host_id_overlap(const IdSpan& range, const std::vector<HostId>& ids) {
  for (const HostId& h : ids) {
    if (in_span(range, h.id))
      return fmt::format("{} entry \"{}\" ({} {})", h.kind, h.name, h.kind == "group" ? "gid" : "uid", h.id);
  }
  return std::nullopt;
}

std::optional<std::string> subid_overlap(const IdSpan& range, const std::vector<SubidEntry>& entries,
                                         std::string_view file) {
  for (const SubidEntry& e : entries) {
    if (overlaps(range, e.span)) return fmt::format("{} entry \"{}\"", file, e.line);
  }
  return std::nullopt;
}

std::string uid_range_refusal(const IdSpan& range, std::string_view what) {
  return fmt::format("uid range {} overlaps {}; pick another [accounts] uid_base", span_text(range), what);
}

std::vector<HostId> host_ids_in(const IdSpan& range) {
  std::vector<HostId> ids;
  ::setpwent();
  while (const passwd* pw = ::getpwent()) {
    if (in_span(range, pw->pw_uid)) add_unique(ids, {"passwd", pw->pw_name, pw->pw_uid});
  }
  ::endpwent();
  ::setgrent();
  while (const group* gr = ::getgrent()) {
    if (in_span(range, gr->gr_gid)) add_unique(ids, {"group", gr->gr_name, gr->gr_gid});
  }
  ::endgrent();
  // Sources that do not enumerate may still answer a lookup by id.
  for (uint64_t id : {range.first, range.last()}) {
    if (const passwd* pw = ::getpwuid(static_cast<uid_t>(id))) add_unique(ids, {"passwd", pw->pw_name, pw->pw_uid});
    if (const group* gr = ::getgrgid(static_cast<gid_t>(id))) add_unique(ids, {"group", gr->gr_name, gr->gr_gid});
  }
  return ids;
}

std::optional<std::string> host_uid_range_conflict(const IdSpan& range, const std::string& subuid_path,
                                                   const std::string& subgid_path) {
  if (std::optional<std::string> hit = host_id_overlap(range, host_ids_in(range)))
    return uid_range_refusal(range, *hit);
  for (const std::string& path : {subuid_path, subgid_path}) {
    std::optional<std::string> text = read_file_if_exists(path, 16 << 20);
    if (!text) continue;
    if (std::optional<std::string> hit = subid_overlap(range, parse_subid_text(*text), path))
      return uid_range_refusal(range, *hit);
  }
  return std::nullopt;
}

UidRangeLock UidRangeLock::acquire(const IdSpan& range, const std::string& state_dir, const std::string& dir) {
  std::string parent = dir.substr(0, dir.find_last_of('/'));
  if (!parent.empty()) make_dir(parent);
  make_dir(dir);
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd) throw sys_error("open(" + dir + ")");
  const std::string global_path = dir + "/.lock";
  UniqueFd global(::openat(dfd.get(), ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!global) throw sys_error("open(" + global_path + ")");
  lock_exclusive(global.get(), global_path);

  // Under the global lock: every range file is either live (flocked) or stale.
  UniqueFd listing(::dup(dfd.get()));
  if (!listing) throw sys_error("dup(" + dir + ")");
  DIR* d = ::fdopendir(listing.get());
  if (!d) throw sys_error("fdopendir(" + dir + ")");
  listing.release();
  std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  for (const std::string& name : names) {
    std::optional<IdSpan> theirs = parse_span_text(name);
    if (!theirs) continue;
    UniqueFd f(::openat(dfd.get(), name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!f) continue;
    if (::flock(f.get(), LOCK_EX | LOCK_NB) == 0) {  // its daemon is gone
      ::unlinkat(dfd.get(), name.c_str(), 0);
      continue;
    }
    if (errno != EWOULDBLOCK) throw sys_error("flock(" + dir + "/" + name + ")");
    if (overlaps(range, *theirs))
      throw UsageError(
          fmt::format("uid range {} overlaps that of another agentbox serve ({}, uids {}); pick another [accounts] "
                      "uid_base or stop that daemon",
                      span_text(range), describe_holder(f.get()), name));
  }

  std::string name = span_text(range);
  UniqueFd mine(::openat(dfd.get(), name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!mine) throw sys_error("open(" + dir + "/" + name + ")");
  try {
    check(::flock(mine.get(), LOCK_EX | LOCK_NB), "flock(" + dir + "/" + name + ")");
    write_all(mine.get(), fmt::format("pid {}\nstate {}\n", ::getpid(), state_dir));
  } catch (...) {
    ::unlinkat(dfd.get(), name.c_str(), 0);
    throw;
  }
  return UidRangeLock(dir, name, std::move(mine), ::getpid());
}

UidRangeLock::~UidRangeLock() {
  if (!fd_ || ::getpid() != owner_) return;
  // Under the global lock, so a starting daemon never sees the file between unlink and close.
  UniqueFd global(::open((dir_ + "/.lock").c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (global) ::flock(global.get(), LOCK_EX);
  ::unlink((dir_ + "/" + name_).c_str());
}

}  // namespace agentbox
