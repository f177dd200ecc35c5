#include "util/capabilities.hpp"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/error.hpp"

namespace agentbox {
namespace {

struct Caps {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
};

Caps current() {
  Caps c;
  check(::syscall(SYS_capget, &c.header, c.data), "capget");
  return c;
}

}  // namespace

void drop_capability(int cap) {
  Caps c = current();
  const auto word = static_cast<size_t>(cap / 32);
  const uint32_t bit = 1u << (cap % 32);
  c.data[word].effective &= ~bit;
  c.data[word].permitted &= ~bit;
  c.data[word].inheritable &= ~bit;
  check(::syscall(SYS_capset, &c.header, c.data), "capset");
}

}  // namespace agentbox
