#pragma once
// Every step of a box start and whether it must succeed, in one table (STYLE point 4). A
// required step that fails stops the start (the box never reports ready). An optional step that
// fails is reported once with its reason, through the process's fallback sink, and the start
// goes on the way the table says. `agentbox doctor` prints the same table with what it finds.
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace agentbox {

enum class StepNeed { required, optional };

enum class StartStep {
  // the parent's side (box/launch.cpp, box/zygote.cpp)
  zygote,         // the daemon's inits come from a zygote
  etc_template,   // the zygote's shared /etc template
  etc_snapshot,   // `agentbox run`: the /etc snapshot its boxes share
  parent_etc,     // /etc built by the parent while init execs
  new_mount_api,  // open_tree/mount_setattr
  cgroup,         // the box's cgroup with its limits
  // inside the box, in contain()'s order (box/contain/contain.cpp)
  network,
  mounts,
  cgroup_namespace,
  hostname,
  rlimits,
  identity,
  dumpable,
  no_new_privs,
  landlock,
  seccomp,
  // the daemon's upkeep of a running box
  idle_check,  // asking init how many processes are left before an idle stop
};

struct StartStepInfo {
  StartStep step;
  const char* name;
  StepNeed need;
  const char* without;  // what happens when it fails (optional) or why it may not (required)
};

// The table, in start order.
std::span<const StartStepInfo> start_steps();
const StartStepInfo& step_info(StartStep step);

// An optional step failed: report it (once per step and reason) and go on as the table says.
// A required step's failure is thrown as agentbox::Error naming the step.
void step_failed(StartStep step, std::string_view reason);

// Where reports go instead of the log (util/log.hpp, a warning of "box"): doctor collects them
// for its table. None (the default): the log.
using StepReportSink = std::function<void(const StartStepInfo&, std::string_view reason)>;
void set_step_report_sink(StepReportSink sink);

}  // namespace agentbox
