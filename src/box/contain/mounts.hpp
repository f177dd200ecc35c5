#pragma once
// The box's filesystem (DESIGN §3): a new root on tmpfs with read-only binds of the system
// tree, a filtered /etc, a fresh /proc, a minimal /dev with its own devpts, private
// size-limited /tmp and /dev/shm, and the home read-write at /home/NAME. Every mount is
// nosuid,nodev (noexec where nothing needs to run from it).
#include <string>
#include <vector>

#include "box/box_spec.hpp"
#include "box/start_plan.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::mounts {

// Names under /etc copied or bound from the host; everything else (shadow, sudoers, ssh host
// keys, ...) stays out. passwd, group, hostname and hosts are written fresh.
const std::vector<std::string>& etc_allowlist();

std::string passwd_file(const BoxSpec& spec);
std::string group_file(const BoxSpec& spec);
std::string hosts_file(const BoxSpec& spec);

// The shared /etc template of the daemon's boxes (box/etc_template.hpp): the allowlisted host
// entries (files copied, symlinks as symlinks, directories bound read-only) in `dir`, with
// empty files where each box binds its own passwd, group, hostname and hosts.
inline constexpr const char* kEtcTemplate = "/tmp/etc";
void build_etc_template(const std::string& dir);

// The /etc of one box, built by the parent that starts it without the zygote (while init
// execs, so the copying is off init's path): a detached read-only tmpfs with the allowlisted
// host files and symlinks, the box's own passwd, group, hostname and hosts, and empty
// directories where init binds the host's allowlisted directories. Needs the new mount API
// (fsopen, 5.2) and CAP_SYS_ADMIN of the initial user namespace; throws Error saying what
// failed (the caller falls back to init's copy: box/start_steps.hpp).
struct EtcTree {
  UniqueFd fd;
  std::vector<std::string> dirs;  // the allowlisted directories left empty in it, to bind
  UniqueFd hold;                  // a shared snapshot's lock (box/etc_snapshots.hpp): keep while the box runs
};
EtcTree build_etc_tree(const BoxSpec& spec);

// What build_etc_tree puts in its tmpfs, into the directory dest_dir from the host's /etc at
// host_etc: the allowlisted entries (files copied, symlinks as symlinks, directories empty) and
// the box's own files. Returns the directories left empty, to bind.
std::vector<std::string> fill_etc_dir(int host_etc, int dest_dir, const BoxSpec& spec);

// What fill_etc_dir would make from host_etc for spec, as text: each allowlisted entry's kind
// and, for a file, its inode, size, mode, owner and times (a write always changes ctime); a
// symlink's target; for a directory nothing more (its content is bound at the start, not
// copied); and the box's own files. Equal texts, equal trees (box/etc_snapshots.hpp).
struct EtcFingerprint {
  std::string text;
  std::vector<std::string> dirs;  // as fill_etc_dir returns them
};
EtcFingerprint etc_fingerprint(int host_etc, const BoxSpec& spec);

// Where a box's /etc comes from (the start plan's choice) and what init has for it.
struct EtcFrom {
  EtcSource source = EtcSource::init_copy;
  bool template_mounted = false;       // the zygote's template tmpfs covers /tmp here: detach it
  int tree_fd = -1;                    // parent_tree: the tree from build_etc_tree
  std::vector<std::string> tree_dirs;  // its EtcTree::dirs
};

// Masks what a fresh proc mounted at `proc` shows of the whole host (apply_in_child does it to
// the box's /proc; the benchmark times it alone): host-wide files read empty (`dev_null` bound
// over them), hardware directories show `empty_dir` (bound read-only), `sys` is read-only.
void mask_proc(const std::string& proc, const std::string& dev_null, const std::string& empty_dir);

// Builds the root and pivots into it; afterwards nothing of the host tree is reachable but
// what the spec names. Runs in init, in the box's own mount namespace, before privileges drop.
// /etc is a clone of the zygote's template, or the parent's tree, with the box's own files;
// else a copy of the host's made here. legacy_mounts: binds with mount(2) (kernels before 5.12).
void apply_in_child(const BoxSpec& spec, bool legacy_mounts, const EtcFrom& etc = {});

}  // namespace agentbox::mounts
