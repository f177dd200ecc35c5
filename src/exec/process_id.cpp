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
  char hex[8];
  std::snprintf(hex, sizeof hex, "%06x", static_cast<unsigned>(rng() & 0xFFFFFF));
  return std::string(stamp) + "-" + hex;
}

}  // namespace agentbox::exec
