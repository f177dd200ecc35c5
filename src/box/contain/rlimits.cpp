#include "box/contain/rlimits.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "util/error.hpp"

namespace agentbox::rlimits {

std::vector<Setting> for_spec(const BoxSpec& spec) {
  std::vector<Setting> s = {
      // 0 stops core files; a piped core_pattern ignores it (doctor reports that case).
      {RLIMIT_CORE, "core", 0},
      {RLIMIT_NOFILE, "nofile", spec.limits.nofile},
  };
  if (spec.limits.nproc) s.push_back({RLIMIT_NPROC, "nproc", spec.limits.nproc});
  // No one file larger than the account's whole disk (SIGXFSZ, then EFBIG).
  if (spec.limits.file_size) s.push_back({RLIMIT_FSIZE, "fsize", spec.limits.file_size});
  return s;
}

void apply_in_child(const BoxSpec& spec) {
  for (const auto& s : for_spec(spec)) {
    // Limits only ever go down: raising a hard limit needs CAP_SYS_RESOURCE, which hosts
    // (and containers running agentbox) may not grant.
    rlimit cur{};
    check(::getrlimit(s.resource, &cur), fmt::format("getrlimit({})", s.name));
    const rlim_t v = std::min(s.value, cur.rlim_max);
    rlimit rl{v, v};
    check(::setrlimit(s.resource, &rl), fmt::format("setrlimit({}, {})", s.name, s.value));
  }
}

}  // namespace agentbox::rlimits
