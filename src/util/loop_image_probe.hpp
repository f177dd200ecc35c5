#pragma once
// Can this host mount an ext4 image through a loop device (the quota backend of
// volumes/volume_backend.hpp)? Here, not in volumes/, so `agentbox doctor` (the static CLI,
// which links neither volumes/ nor fs/ and their libzip) asks the same question the server does.
#include <string>

namespace agentbox {

// /dev/loop-control usable and mkfs.ext4 runs; false with why set when not.
bool loop_images_supported(std::string* why);

}  // namespace agentbox
