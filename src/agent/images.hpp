#pragma once
// Claude Code's host files (the CLI, the operator's skills) as the daemon's boxes bind them:
// sealed read-only copies (volumes/sealed_image.hpp) mounted under STATE/agent/, so that no box's
// mountinfo names where the host keeps them. The images are cached host-wide in kImageCache
// (STATE/images where that cannot be made) and shared by every daemon of the host. A host
// that cannot mount images (no loop devices) binds the originals, and the daemon says so once.
#include <memory>
#include <string>
#include <vector>

#include "exec/account_boxes.hpp"
#include "volumes/sealed_image.hpp"

namespace agentbox::agent {

inline constexpr const char* kImageCache = "/var/cache/agentbox";

class AgentImages {
 public:
  // found: the host paths (find_agent); the mounts live as long as this object.
  AgentImages(const exec::AgentMounts& found, const std::string& state_dir);
  // What boxes bind: paths inside the images, or the originals where sealing failed.
  const exec::AgentMounts& mounts() const { return mounts_; }

 private:
  exec::AgentMounts mounts_;
  std::vector<std::unique_ptr<SealedImage>> images_;
};

}  // namespace agentbox::agent
