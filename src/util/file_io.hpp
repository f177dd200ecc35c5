#pragma once
// Small whole-file helpers for procfs, cgroupfs and config files. They throw agentbox::Error.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox {

// Reads a whole file (up to max bytes).
std::string read_file(const std::string& path, size_t max = 1 << 20);
// Same, but nullopt if the file does not exist. Returns instead of throwing: an optional file is
// usually missing, and a static binary's first throw costs ~0.5 ms (libgcc sorts every FDE).
std::optional<std::string> read_file_if_exists(const std::string& path, size_t max = 1 << 20);
// Writes data to an existing file (no create, no truncate semantics beyond O_TRUNC): for
// procfs/cgroupfs/sysfs knobs.
void write_file(const std::string& path, std::string_view data);
// Same, relative to a directory fd.
void write_file_at(int dirfd, const std::string& name, std::string_view data);
std::string read_file_at(int dirfd, const std::string& name, size_t max = 1 << 20);
// Makes path hold exactly data (mode for a new file), all or nothing: written to a temporary
// file beside it, flushed, then renamed over it. For files other programs read at any moment
// (nginx's pins map, the cluster's pins).
void replace_file(const std::string& path, std::string_view data, unsigned mode = 0644);
// Writes all of data to fd, retrying on EINTR and short writes.
void write_all(int fd, std::string_view data);
// The names in the directory dirfd (not "." or ".."), sorted; dirfd's offset is not moved.
std::vector<std::string> dir_names_at(int dirfd);
// The file `name` in the directory of the running executable (/proc/self/exe), whether or not
// it exists ("" if /proc/self/exe cannot be read): where agentbox finds its companion
// binaries (agentbox-init, agentbox-serve).
std::string path_next_to_self(std::string_view name);

}  // namespace agentbox
