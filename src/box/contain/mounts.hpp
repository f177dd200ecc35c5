#pragma once
// The box's filesystem (DESIGN §3): a new root on tmpfs with read-only binds of the system
// tree, a filtered /etc, a fresh /proc, a minimal /dev with its own devpts, private
// size-limited /tmp and /dev/shm, and the home read-write at /home/NAME. Every mount is
// nosuid,nodev (noexec where nothing needs to run from it).
#include <string>
#include <vector>

#include "box/box_spec.hpp"
#include "util/unique_fd.hpp"

namespace agentbox::mounts {

// Which kernel mount API builds the binds: the new one (open_tree + mount_setattr, which sets
// flags on every submount) or the classic mount(2) fallback for kernels before 5.12.
enum class Api { new_api, legacy };
Api choose_api(bool force_legacy);

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

// A box with a bind into /etc needs a mount point made there, so it gets a copy of /etc made
// by init: neither the read-only template nor a tree built outside.
bool binds_into_etc(const BoxSpec& spec);

// The /etc of one box, built by the parent that starts it without the zygote (while init
// execs, so the copying is off init's path): a detached read-only tmpfs with the allowlisted
// host files and symlinks, the box's own passwd, group, hostname and hosts, and empty
// directories where init binds the host's allowlisted directories. Needs the new mount API
// (fsopen, 5.2) and CAP_SYS_ADMIN of the initial user namespace; without them, or on any
// failure, returns no fd and init copies /etc itself.
struct EtcTree {
  UniqueFd fd;
  std::vector<std::string> dirs;  // the allowlisted directories left empty in it, to bind
};
EtcTree build_etc_tree(const BoxSpec& spec);

// Where a box's /etc comes from, when not from a copy init makes.
struct EtcSource {
  bool zygote_template = false;  // the zygote's template is at kEtcTemplate (on a tmpfs on /tmp)
  int tree_fd = -1;              // a tree from build_etc_tree
  std::vector<std::string> tree_dirs;  // its EtcTree::dirs
};

// Builds the root and pivots into it; afterwards nothing of the host tree is reachable but
// what the spec names. Runs in init, in the box's own mount namespace, before privileges drop.
// /etc is a clone of the zygote's template, or the parent's tree, with the box's own files;
// else (or for a box that binds into /etc) a copy of the host's made here.
void apply_in_child(const BoxSpec& spec, Api api, EtcSource etc = {});

}  // namespace agentbox::mounts
