#pragma once
// Loop devices for the images the daemon mounts (account volumes, volumes/loop_volume.cpp; the sealed
// copies boxes show, volumes/sealed_image.hpp). Mounts the host's filesystems: root's work only.
#include <string>

#include "util/unique_fd.hpp"

namespace agentbox {

// Binds the open image `image` (its path for the kernel's record: image_path) to a free loop
// device, which frees itself when its last mount goes (LO_FLAGS_AUTOCLEAR), and returns that
// device open, its path in `device`. With direct I/O where the host allows it, so the image's
// pages are not cached twice; read_only: a device nothing can write through.
UniqueFd attach_loop(const UniqueFd& image, const std::string& image_path, std::string& device, bool read_only = false);

}  // namespace agentbox
