#pragma once
// /proc/<pid>/mountinfo, read for its first five fields (proc(5)): the box's own mounts counted
// by device (tests), the /proc masks a runtime lays (box/pod_needs), the volumes a thread's
// namespace leaves out (volumes/e2fsprogs_runner).
#include <string>
#include <vector>

namespace agentbox {

struct MountInfoEntry {
  std::string id, parent;
  std::string device;  // MAJOR:MINOR
  std::string root;    // the mount's root within its filesystem
  std::string point;   // where it is mounted
};

// One entry a well-formed line; the paths unescaped (the kernel writes space, tab, newline and
// backslash as \ooo).
std::vector<MountInfoEntry> parse_mountinfo(const std::string& text);

}  // namespace agentbox
