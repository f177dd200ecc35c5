#include "backup/mirror_layout.hpp"

#include <ctime>

#include <fmt/format.h>

namespace agentbox::backup {

std::string utc_date(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

bool is_date_name(std::string_view name) {
  if (name.size() != 10 || name[4] != '-' || name[7] != '-') return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (i != 4 && i != 7 && (name[i] < '0' || name[i] > '9')) return false;
  return true;
}

}  // namespace agentbox::backup
