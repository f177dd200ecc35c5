#pragma once
// The uid range of `agentbox serve` ([accounts] uid_base/uid_count) belongs to it alone: no host
// account or group has an id in it, no /etc/subuid or /etc/subgid range (a user namespace's
// ids) crosses it, and no other agentbox daemon on the host uses any of it. Boxes sharing a uid
// share the kernel's per-uid limits (inotify instances, processes) and a host account with a
// uid in the range would own box files. Every account's gid equals its uid, so gids are checked
// against the same range.
//
// Pure parts (parsing, overlap, messages) first; then the host checks and the lock.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/unique_fd.hpp"

namespace agentbox {

// Ids [first, first + count).
struct IdSpan {
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t last() const { return first + count - 1; }  // count > 0
};

bool overlaps(const IdSpan& a, const IdSpan& b);
// "1000000-1065535"
std::string span_text(const IdSpan& span);
// The inverse of span_text; nullopt for anything else (so other files in the lock directory are
// left alone).
std::optional<IdSpan> parse_span_text(std::string_view text);

// One line of /etc/subuid or /etc/subgid: "name:start:count" (name may be numeric).
struct SubidEntry {
  std::string line;  // as written, for messages
  IdSpan span;
};
// The entries of a subuid/subgid file. Comments, blank lines and lines that are not
// name:start:count with a positive count are skipped (shadow-utils skips them too).
std::vector<SubidEntry> parse_subid_text(std::string_view text);

// A passwd or group entry the name service knows.
struct HostId {
  std::string kind;  // "passwd" or "group"
  std::string name;
  uint64_t id = 0;
};

// The first conflict of range with the entries, as the end of "uid range A-B overlaps ...":
//   passwd entry "nobody" (uid 65534)   /etc/subuid entry "alice:100000:65536"
std::optional<std::string> host_id_overlap(const IdSpan& range, const std::vector<HostId>& ids);
std::optional<std::string> subid_overlap(const IdSpan& range, const std::vector<SubidEntry>& entries,
                                         std::string_view file);

// The refusal: "uid range A-B overlaps WHAT; pick another [accounts] uid_base".
std::string uid_range_refusal(const IdSpan& range, std::string_view what);

// Every passwd and group entry with an id in range, from the name service (getpwent/getgrent,
// so LDAP and other sources count where they enumerate; getpwuid/getgrgid of the range's ends
// catch some that do not).
std::vector<HostId> host_ids_in(const IdSpan& range);

// The first conflict of range with the host's accounts, groups and subordinate id files, as a
// refusal message; nullopt when the range is free. A missing subid file has no entries.
std::optional<std::string> host_uid_range_conflict(const IdSpan& range, const std::string& subuid_path = "/etc/subuid",
                                                   const std::string& subgid_path = "/etc/subgid");

// Where running daemons record their ranges: one file per daemon, named by its range
// ("1000000-1065535"), holding "pid N" and "state DIR" lines and flock()ed for the daemon's
// life. A file whose flock can be taken belonged to a daemon that died: it is removed. The
// check and the creation happen under DIR/.lock, so of two daemons starting at once on
// overlapping ranges exactly one wins.
constexpr const char* kUidRangeLockDir = "/run/agentbox/uid-ranges";

class UidRangeLock {
 public:
  // Takes range for this process, or throws UsageError naming the daemon that holds an
  // overlapping one (its pid, state directory and range). dir is created (0755) if missing.
  static UidRangeLock acquire(const IdSpan& range, const std::string& state_dir,
                              const std::string& dir = kUidRangeLockDir);

  UidRangeLock(UidRangeLock&&) = default;
  UidRangeLock& operator=(UidRangeLock&&) = delete;
  // Removes the file (under DIR/.lock) and lets the range go.
  ~UidRangeLock();

 private:
  UidRangeLock(std::string dir, std::string name, UniqueFd fd, pid_t owner)
      : dir_(std::move(dir)), name_(std::move(name)), fd_(std::move(fd)), owner_(owner) {}
  std::string dir_;
  std::string name_;
  UniqueFd fd_;  // holds the flock
  pid_t owner_;  // a forked child that unwinds leaves the file to its parent
};

}  // namespace agentbox
