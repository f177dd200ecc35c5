#include "net/socket_buffers.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <climits>

#include "util/error.hpp"

namespace agentbox::net {
namespace {

void set_size(int fd, int force, int plain, const char* name, int half) {
  if (::setsockopt(fd, SOL_SOCKET, force, &half, sizeof half) == 0) return;
  if (errno != EPERM) throw sys_error(std::string("setsockopt(") + name + "FORCE)");
  if (::setsockopt(fd, SOL_SOCKET, plain, &half, sizeof half) != 0) throw sys_error(std::string("setsockopt(") + name + ")");
}

}  // namespace

void bound_socket_buffers(int fd, size_t bytes) {
  if (bytes == 0) return;
  const int half = static_cast<int>(std::min<size_t>(bytes / 2, INT_MAX / 2));
  set_size(fd, SO_RCVBUFFORCE, SO_RCVBUF, "SO_RCVBUF", half);
  set_size(fd, SO_SNDBUFFORCE, SO_SNDBUF, "SO_SNDBUF", half);
}

}  // namespace agentbox::net
