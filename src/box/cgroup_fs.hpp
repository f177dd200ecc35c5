#pragma once
// Internal to the cgroup drivers (cgroup_v1.cpp, cgroup_v2.cpp): the few file operations both
// versions do on a cgroupfs directory, each throwing agentbox::Error with the path and value.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox::cgroupfs {

// Group names come from the caller and become one path component: no '/', no "..".
void check_group_name(const std::string& name);

bool exists(const std::string& path);
// mkdir that accepts an existing directory (parents are shared; a group left by a crashed
// daemon is taken over and gets its limits rewritten). True if it made the directory.
bool make_dir(const std::string& path);
// Throws unless this process may create groups in dir (an existing parent made by root is
// not usable by an ordinary user).
void check_writable(const std::string& dir);

// Writes one value to a knob the kernel created ("write(/…/pids.max, "20"): …" on failure).
void write_knob(const std::string& path, std::string_view value);
// Reads a knob holding one unsigned number ("max" reads as UINT64_MAX).
uint64_t read_u64(const std::string& path);
// Same, 0 when the file does not exist (a kernel without that counter).
uint64_t read_u64_or_zero(const std::string& path);
// Reads the value of `key` from a flat-keyed file ("key value" lines: cpu.stat,
// memory.events, memory.oom_control); 0 when the file or the key is absent.
uint64_t read_keyed_u64(const std::string& path, std::string_view key);
// The pids listed in a cgroup.procs/tasks file (empty when the file is gone).
std::vector<pid_t> read_pids(const std::string& path);

// SIGKILLs every pid listed in each procs file; returns how many it signalled.
size_t kill_listed(const std::vector<std::string>& procs_files);

// Removes a group directory, retrying for about a second while the kernel reports EBUSY
// (tasks still exiting); on_busy runs before each retry (a kill sweep for v1). A missing
// directory is success, so destroy() stays idempotent.
void remove_group_dir(const std::string& dir, const std::function<void()>& on_busy);

}  // namespace agentbox::cgroupfs
