#include "net/socket_buffers.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <climits>

#include "util/error.hpp"

namespace agentbox::net {
namespace {

// bytes as the kernel counts them: it is given half.
void set_size(int fd, int force, int plain, const char* name, size_t bytes) {
  const int half = static_cast<int>(std::min<size_t>(bytes / 2, INT_MAX / 2));
  if (::setsockopt(fd, SOL_SOCKET, force, &half, sizeof half) == 0) return;
  if (errno != EPERM) throw sys_error(std::string("setsockopt(") + name + "FORCE)");
  if (::setsockopt(fd, SOL_SOCKET, plain, &half, sizeof half) != 0)
    throw sys_error(std::string("setsockopt(") + name + ")");
}

}  // namespace

void bound_socket_buffers(int fd, size_t receive_bytes) {
  if (receive_bytes == 0) return;
  set_size(fd, SO_RCVBUFFORCE, SO_RCVBUF, "SO_RCVBUF", receive_bytes);
  set_size(fd, SO_SNDBUFFORCE, SO_SNDBUF, "SO_SNDBUF", receive_bytes / 2);
}

}  // namespace agentbox::net
