#pragma once
// One pass of the mirror over one home: makes ACCOUNT_DIR/home a copy of the source tree and
// keeps what it replaces or removes under ACCOUNT_DIR/.deleted/DATE/ (backup/mirror_layout.hpp).
//
// What a pass guarantees:
// - Per-file consistency: a file is copied to a temporary name in its final directory and
//   renamed into place only when complete and only if the source's size, mtime and ctime did
//   not change while it was copied (else the previous copy stays and the next pass retries).
//   A killed pass leaves at most a temporary file, removed by the next pass; never a torn file
//   under a real name.
// - Nothing is followed: the source is walked with openat(O_NOFOLLOW) and
//   fstatat(AT_SYMLINK_NOFOLLOW) from directory descriptors, a symlink is copied as a symlink
//   (its target text), and a directory swapped for a symlink mid-walk fails the open.
//   Sockets, fifos and devices are skipped.
// - Modes, owners and times are kept (files, directories, symlinks).
// - Unchanged files (same size and mtime, as rsync's quick check) are not read again.
#include <atomic>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox::backup {

struct MirrorStats {
  uint64_t files_copied = 0;  // regular files and symlinks written
  uint64_t bytes_copied = 0;
  uint64_t unchanged = 0;     // entries the quick check found equal
  uint64_t kept_deleted = 0;  // entries moved or linked into .deleted
  uint64_t changing = 0;      // files that changed while copied: not published, retried next pass
  uint64_t errors = 0;
  std::vector<std::string> error_messages;  // the first few, "PATH: operation: reason"

  void add(const MirrorStats& other);
  void error(std::string message);
};

struct MirrorTreeOptions {
  // Set by another thread to end the pass early (daemon shutdown): the entries not reached yet
  // keep their previous copy; nothing is judged deleted for lack of a visit.
  const std::atomic<bool>* stop = nullptr;
  // Source entries named like a copy in progress (kTempPrefix) are not copied: a restore from
  // the mirror, where such a name is what a killed pass left, not a file of the home.
  bool skip_temporaries = false;
  // Test hook: runs after a file's bytes are copied and before the source is checked again
  // (relative path of the file), so a test can change the source mid-copy.
  std::function<void(const std::string& rel)> after_copy;
  // The copy's directory in account_dir_fd, and where under .deleted/DATE what it replaces or
  // removes is kept ("": at its path there): a home's "home" and "", the contexts' workspaces'
  // "workspaces" and ".account-workspaces" (backup/mirror_layout.hpp).
  std::string_view copy = "home";
  std::string_view kept_under = "";
};

// Mirrors the tree under src_dir_fd (a directory descriptor of the home) into
// account_dir_fd/home (options.copy); entries replaced or gone go to
// account_dir_fd/.deleted/<date>/ (options.kept_under).
// Errors on single entries are counted in the result and the pass goes on; an entry whose
// source directory could not be read is never treated as deleted.
MirrorStats mirror_tree(int src_dir_fd, int account_dir_fd, std::string_view date,
                        const MirrorTreeOptions& options = {});

// Removes the days in account_dir_fd/.deleted that are keep_days old or older on `today`
// (both "YYYY-MM-DD"): a file deleted on the 1st with keep_days 7 is gone on the 8th.
void purge_deleted(int account_dir_fd, std::string_view today, int keep_days, MirrorStats& stats);

// The mirrors of accounts that no longer exist (deleted by the operator): every directory of
// mirror_root_fd not named in `live` (nor starting with '.') for which `gone` says yes (null:
// every one) has its home moved into its .deleted/<today>/ (as ".account-home", its workspaces
// as ".account-workspaces"), so it is kept keep_days like any deleted file and then purged; the account's directory
// (with its account.json) goes once nothing is left in it. A directory `gone` says no to keeps its home: an account
// this node never deleted, waiting for `backup restore --all` after a lost disk.
void put_away_gone_accounts(int mirror_root_fd, const std::set<std::string>& live, std::string_view today,
                            int keep_days, MirrorStats& stats,
                            const std::function<bool(const std::string& name)>& gone = nullptr);

// Removes `name` in dirfd and, for a directory, everything under it, following no symlink.
void remove_tree(int dirfd, const std::string& name);

}  // namespace agentbox::backup
