#pragma once
// The /etc snapshots that `agentbox run`'s boxes share. A box's /etc is a copy of the host's
// allowlisted entries plus the box's own passwd, group, hostname, hosts and resolv.conf
// (box/contain/mounts.hpp); making it afresh for every box costs ~25 file creations and copies
// (about a tenth of a one-shot box's CPU, bench/RESULTS.md). A snapshot is that tree made once,
// in a directory DIR/KEY (root's: /run/agentbox/etc), where KEY names everything the tree is
// made of: the stat of each allowlisted host entry (mounts::etc_fingerprint), the box's own
// files and the running binary. A start whose KEY exists takes a read-only clone of it (one
// open_tree); a change to any of those inputs gives a new KEY and a new snapshot, so a box never
// sees an older /etc than one made for it alone would show.
//
// Each box holds a shared flock on its snapshot while it runs (EtcTree::hold, in whoever owns
// the box); a snapshot that no box holds and whose KEY is not current is removed when a new one
// is made. Runs on: the thread that starts the box (blocking calls; no shared state but the
// directory, which flock and rename keep consistent between processes).
#include <string>

#include "box/box_spec.hpp"
#include "box/contain/mounts.hpp"

namespace agentbox {

// The root `agentbox run`'s snapshot directory.
inline constexpr const char* kRunEtcSnapshots = "/run/agentbox/etc";

// The snapshot of spec's /etc in dir, made first if there is none for the current inputs, as
// a detached read-only clone with its directories to bind and the lock that keeps it (hold).
// host_etc is the host's /etc (tests pass a tree of their own). Throws agentbox::Error: dir
// that is not root's own (or writable by others), a failed copy, no mount API; the caller then
// makes a tree of its own (mounts::build_etc_tree).
mounts::EtcTree shared_etc_tree(const BoxSpec& spec, const std::string& dir, const std::string& host_etc = "/etc");

}  // namespace agentbox
