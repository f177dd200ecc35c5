#pragma once
// The box's filesystem (DESIGN §3): a new root on tmpfs with read-only binds of the system
// tree, a filtered /etc, a fresh /proc, a minimal /dev with its own devpts, private
// size-limited /tmp and /dev/shm, and the home read-write at /home/NAME. Every mount is
// nosuid,nodev (noexec where nothing needs to run from it).
#include <string>
#include <vector>

#include "box/box_spec.hpp"

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

// Builds the root and pivots into it; afterwards nothing of the host tree is reachable but
// what the spec names. Runs in init, in the box's own mount namespace, before privileges drop.
// etc_template: the namespace holds the zygote's /etc template at kEtcTemplate (on a tmpfs
// mounted at /tmp): /etc is a clone of it plus the box's four files, instead of a copy of the
// host's made here.
void apply_in_child(const BoxSpec& spec, Api api, bool etc_template = false);

}  // namespace agentbox::mounts
