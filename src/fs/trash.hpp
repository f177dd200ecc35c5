#pragma once
// An account's trash (DESIGN §8): where DELETE /files/delete puts entries, in the account's
// volume beside its home (so a box never sees it and it is charged to the account's quota).
// Each item is a directory TRASH/ID holding `entry` (the deleted file, link or tree, moved there
// by rename: nothing is copied) and `info` (JSON: where it was, when, its type and size). Ids
// sort by deletion time. Every operation runs with the account's fs identity (the trash is the
// account's, 0700), from descriptors, never following a link.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fs/confined_dir.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {

// A context's workspace (issue 35) held in the trash as one item: restored to where its
// context's box finds it, not into a home.
struct TrashWorkspace {
  std::string profile;
  std::string hash;     // its directory's name (store/box_key.hpp: context_hash)
  std::string context;  // as X-Terminal-Context-Id named it; "" when unknown
};

struct TrashItem {
  std::string id;
  std::string path;                         // where it was, as the box sees it
  std::string type;                         // "file" or "directory" (a link is a "file")
  uint64_t size = 0;                        // bytes of the files in it (apparent sizes)
  int64_t deleted_at = 0;                   // unix seconds
  std::optional<TrashWorkspace> workspace;  // set: a context's workspace (put_workspace)
};

struct TrashPut {
  TrashItem item;
  bool trashed = true;  // false: the volume was full even with the trash emptied, so it was deleted
};

struct TrashRestore {
  std::string path;                     // where it is now, as the box sees it
  std::optional<std::string> replaced;  // the id the entry that was in the way went to
};

class Trash {
 public:
  // `trash_dir` is the host path of the account's trash; `home` the account's home.
  Trash(const std::string& trash_dir, const ConfinedDir& home);

  // Moves `p` into the trash. A full volume first gives up the oldest items; when there is no
  // room for even the item's bookkeeping, the entry is deleted outright (a full disk must be
  // freeable by deleting) and `trashed` says so.
  TrashPut put(const HomePath& p);
  // Newest first. Items left half-made by a crash are cleaned up on the way.
  std::vector<TrashItem> list() const;
  // Moves the item back to where it was (or to `to`), making missing parent directories. An
  // entry in the way goes to the trash first: nothing is lost. Unknown id: not_found.
  TrashRestore restore(const std::string& id, const std::optional<HomePath>& to);
  // The item `id`, if the trash holds it.
  std::optional<TrashItem> find(const std::string& id) const;

  // A context's workspace: `host_dir` (made by the daemon, outside every box's view) moved into
  // the trash as one item, shown as the home its box saw. Runs as the daemon for the move (the
  // workspace's parent is the daemon's) and leaves the item the account's. Never deletes: a
  // volume too full for the item's bookkeeping after the oldest items went is an error.
  TrashItem put_workspace(const std::string& host_dir, const TrashWorkspace& ws);
  // Moves a workspace item back to `host_dir` (its parents made as the daemon's, 0711); a
  // workspace in the way goes to the trash first. restore() of a workspace item without `to`
  // is bad_request: the route that knows where workspaces live restores it here.
  TrashRestore restore_workspace(const std::string& id, const std::string& host_dir);

  // Deletes one item for good (not_found when there is none); clear() deletes them all.
  void remove(const std::string& id);
  size_t clear();
  // Items deleted before `cutoff` (unix seconds) are deleted for good; returns how many.
  size_t purge_before(int64_t cutoff);
  // Deletes the oldest item; false when the trash is empty.
  bool purge_oldest();

 private:
  std::vector<std::string> ids() const;  // sorted, oldest first
  std::optional<TrashItem> read_item(const std::string& id) const;
  void drop(const std::string& id);  // as the account; the caller holds the identity

  UniqueFd dir_;
  const ConfinedDir& home_;
};

// Item ids are made by the trash only: 13 digits of milliseconds, '-', 8 hex digits.
bool is_trash_id(std::string_view id);

}  // namespace agentbox
