#include "util/loop_image_probe.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"
#include "util/run_program.hpp"

namespace agentbox {

bool loop_images_supported(std::string* why) {
  if (::access("/dev/loop-control", R_OK | W_OK) != 0) {
    if (why) *why = std::string("/dev/loop-control: ") + std::strerror(errno);
    return false;
  }
  ProgramResult r;
  try {
    r = run_program({"mkfs.ext4", "-V"});
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
  if (r.status != 0) {
    if (why) *why = "mkfs.ext4 -V failed";
    return false;
  }
  return true;
}

}  // namespace agentbox
