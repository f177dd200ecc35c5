#pragma once
// What an ext4 image holds, read from its superblock without mounting it: GET /admin/accounts
// lists every account's usage, and mounting thousands of idle volumes to ask statvfs would cost
// a loop device each. After a clean unmount the superblock's counts are exact; statvfs on the
// mounted filesystem gives the same numbers (both leave out the metadata overhead).
#include <optional>
#include <string>

#include "volumes/volume_backend.hpp"

namespace agentbox {

// nullopt when `image` is missing or is not ext4.
std::optional<VolumeUsage> ext4_image_usage(const std::string& image);

// Whether `image` was unmounted cleanly: no journal left to replay (the kernel marks it
// needs_recovery while mounted), no error recorded. Only then are its counts exact.
bool ext4_image_settled(const std::string& image);

// Whether `image`'s ext4 recorded an error (EXT4_ERROR_FS: it went read-only on one, e.g. a
// write its host file could not take when the state disk was full), which only e2fsck clears.
bool ext4_image_has_errors(const std::string& image);

}  // namespace agentbox
