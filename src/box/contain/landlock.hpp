#pragma once
// Landlock for a box, at the newest ABI the kernel offers (DESIGN §3): read+execute on the
// read-only tree, read+write on home, /tmp, /dev/shm; the devices under /dev (the pty among
// them) readable, writable and ioctl-able; signals and abstract unix sockets scoped to the box
// (ABI >= 6). No TCP rule: the box's network namespace (only `lo`) is the network boundary.
// Debian 12's <linux/landlock.h> predates most of this: the newer constants are defined in
// landlock.cpp and chosen by the ABI the kernel reports.
#include <cstdint>
#include <string>
#include <vector>

#include "box/box_spec.hpp"

namespace agentbox::landlock {

// The ABI version the running kernel supports; 0 when Landlock is absent or disabled.
int abi_version();

enum class Access {
  read_only,   // read files, list directories, execute
  read_write,  // everything but device nodes: create, remove, rename, truncate, execute
  device,      // read, write, ioctl (ABI >= 5) on existing device files; list directories
  list_only,   // list directory entries, nothing else (the box root, so `ls /` works)
};
struct PathRule {
  std::string path;  // absolute path inside the box (rules are applied after pivot_root)
  Access access;
};

// The rules a box gets (pure; unit-tested). Paths that do not exist at apply time are skipped.
std::vector<PathRule> rules_for(const BoxSpec& spec);

// Restricts the calling process (after pivot_root, with no_new_privs set). Without Landlock
// support it throws unless spec.allow_without_landlock. Returns the ABI it enforced (0 = none).
int apply_in_child(const BoxSpec& spec);

}  // namespace agentbox::landlock
