#include "exec/process_id.hpp"

#include <ctime>
#include <random>

namespace agentbox::exec {

std::string new_process_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  char hex[16];
  std::snprintf(hex, sizeof hex, "%012llx", static_cast<unsigned long long>(rng() & 0xFFFFFFFFFFFFull));
  return std::string(stamp) + "-" + hex;
}

}  // namespace agentbox::exec
