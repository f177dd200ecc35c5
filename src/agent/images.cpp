#include "agent/images.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <iostream>

#include "util/log.hpp"

namespace agentbox::agent {

namespace {

// The host-wide cache, else the state directory (a read-only /var: each daemon its own copy).
std::string cache_dir(const std::string& state_dir) {
  if (::mkdir(kImageCache, 0700) == 0 || errno == EEXIST) return std::string(kImageCache) + "/images";
  return state_dir + "/images";
}

}  // namespace

AgentImages::AgentImages(const exec::AgentMounts& found, const std::string& state_dir) : mounts_(found) {
  const std::string cache = cache_dir(state_dir);
  const auto seal = [&](std::string& path, const char* name, const char* what) {
    if (path.empty()) return;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      images_.push_back(std::make_unique<SealedImage>(path, name, cache, state_dir + "/agent/" + name));
      if (images_.back()->built()) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
        std::cout << "agent: sealed " << what << " into " << images_.back()->image() << " (" << ms.count()
                  << " ms, once per version)\n";
      }
      path = images_.back()->path();
    } catch (const std::exception& e) {  // Error, or std::filesystem's walking the source
      log::warn("agent", "agent: {} bound from its host path, which boxes can read in their mountinfo: {}", what,
                e.what());
    }
  };
  seal(mounts_.claude, "claude", "the CLI");
  seal(mounts_.skills_dir, "skills", "the skills");
}

}  // namespace agentbox::agent
