#include "util/random_hex.hpp"

#include <sys/random.h>

#include <cerrno>
#include <vector>

#include "util/error.hpp"

namespace agentbox {

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  size_t got = 0;
  while (got < raw.size()) {
    const ssize_t n = ::getrandom(raw.data() + got, raw.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw sys_error("getrandom");
    got += static_cast<size_t>(n);
  }
  return hex_of(raw.data(), raw.size());
}

std::string hex_of(const void* data, size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 15];
  }
  return out;
}

}  // namespace agentbox
