#pragma once
// `agentbox doctor`'s trial: one real box started the daemon's way (through a zygote) and one
// the way `agentbox run` starts it, each running /bin/true, so the report says what a box
// start actually does on this host: its plan (box/start_plan.hpp) and every optional step that
// fell back (box/start_steps.hpp), not what the probes suggest.
#include <string>
#include <vector>

#include "box/start_plan.hpp"

namespace agentbox {

struct TrialStart {
  std::string how;  // "daemon (zygote)" or "agentbox run"
  bool ok = false;
  std::string error;  // why it failed
  StartPlan plan;
  std::vector<std::string> fallbacks;  // "etc template: <reason>", one per optional step that fell back
};

// As root: both ways, with a scratch home and uid; as an ordinary user: the user-namespace way.
std::vector<TrialStart> trial_starts(bool as_root);

}  // namespace agentbox
