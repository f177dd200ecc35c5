#include "volumes/loop_device.hpp"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"

namespace agentbox {
namespace {

constexpr int kLoopAttempts = 16;  // LOOP_CTL_GET_FREE races other users of loop devices

}  // namespace

UniqueFd attach_loop(const UniqueFd& image, const std::string& image_path, std::string& device, bool read_only) {
  UniqueFd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control) throw sys_error("open(/dev/loop-control)");
  bool direct_io = true;
  for (int attempt = 0; attempt < kLoopAttempts; ++attempt) {
    const int n = static_cast<int>(check(::ioctl(control.get(), LOOP_CTL_GET_FREE), "LOOP_CTL_GET_FREE"));
    device = "/dev/loop" + std::to_string(n);
    UniqueFd loop(::open(device.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC));
    if (!loop) {
      if (errno == ENOENT) continue;  // the node appears a moment after LOOP_CTL_GET_FREE made it
      throw sys_error("open(" + device + ")");
    }
    loop_config config{};
    config.fd = static_cast<uint32_t>(image.get());
    config.info.lo_flags =
        LO_FLAGS_AUTOCLEAR | (direct_io ? LO_FLAGS_DIRECT_IO : 0) | (read_only ? LO_FLAGS_READ_ONLY : 0);
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), image_path.c_str(), LO_NAME_SIZE - 1);
    if (::ioctl(loop.get(), LOOP_CONFIGURE, &config) == 0) return loop;
    if (errno == EBUSY) continue;  // another process took it first
    if (errno == EINVAL && direct_io) {
      direct_io = false;  // the image's filesystem cannot do O_DIRECT: cached I/O then
      continue;
    }
    throw sys_error("LOOP_CONFIGURE(" + device + ", " + image_path + ")");
  }
  throw Error("no free loop device after " + std::to_string(kLoopAttempts) + " attempts", EBUSY);
}

}  // namespace agentbox
