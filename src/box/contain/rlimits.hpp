#pragma once
// Resource limits set with setrlimit in the box (cgroups carry the hard resource caps).
#include <sys/resource.h>

#include <vector>

#include "box/box_spec.hpp"

namespace agentbox::rlimits {

struct Setting {
  int resource;
  const char* name;
  rlim_t value;  // soft = hard
};

// The table derived from the spec (pure): core dumps off, nofile, nproc when set.
std::vector<Setting> for_spec(const BoxSpec& spec);

void apply_in_child(const BoxSpec& spec);

}  // namespace agentbox::rlimits
