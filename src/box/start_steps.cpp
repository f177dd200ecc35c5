#include "box/start_steps.hpp"

#include <mutex>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/log.hpp"

namespace agentbox {
namespace {

using enum StartStep;
using enum StepNeed;

constexpr StartStepInfo kSteps[] = {
    {zygote, "zygote", optional, "each box's init is cloned and exec'd by the daemon (about 2 ms more per start)"},
    {etc_template, "etc template", optional, "init copies the allowlisted /etc entries itself"},
    {etc_snapshot, "/etc snapshot", optional, "the parent copies the allowlisted /etc entries for this box alone"},
    {parent_etc, "parent-built /etc", optional, "init copies the allowlisted /etc entries itself"},
    {new_mount_api, "new mount API", optional, "binds are made with mount(2); flags are set on each top mount only"},
    {cgroup, "cgroup", required, "memory, pids and cpu limits are the box's only bound on the host"},
    {network, "network", required, "the box would share the host's network"},
    {mounts, "mounts", required, "the box would see the host's tree"},
    {cgroup_namespace, "cgroup namespace", required, "the box would see the host's cgroup tree"},
    {hostname, "hostname", required, "the box would name the host"},
    {rlimits, "rlimits", required, "core dumps and descriptor limits would be the host's"},
    {identity, "identity", required, "the box would run as root with capabilities"},
    {dumpable, "dumpable", required, "the box's processes could ptrace init"},
    {no_new_privs, "no_new_privs", required, "set-uid programs could regain privileges"},
    {landlock, "landlock", required, "unless allow_without_landlock: no second filesystem fence"},
    {seccomp, "seccomp", required, "kernel interfaces the box never needs would be open"},
    {idle_check, "idle check", optional, "a box whose init does not answer is stopped as gone"},
};

std::mutex g_mu;
StepReportSink g_sink;                                            // guarded by g_mu
std::set<std::pair<StartStep, std::string>, std::less<>> g_seen;  // guarded by g_mu

}  // namespace

std::span<const StartStepInfo> start_steps() { return kSteps; }

const StartStepInfo& step_info(StartStep step) {
  for (const auto& s : kSteps)
    if (s.step == step) return s;
  return kSteps[0];  // unreachable: every step has a row
}

void step_failed(StartStep step, std::string_view reason) {
  const StartStepInfo& info = step_info(step);
  if (info.need == required) throw Error(fmt::format("{}: {}", info.name, reason));
  StepReportSink sink;
  {
    std::lock_guard lock(g_mu);
    if (!g_seen.emplace(step, std::string(reason)).second) return;  // said once already
    sink = g_sink;
  }
  if (sink) {
    sink(info, reason);
  } else {
    log::warn("box", "{} unavailable ({}); instead {}", info.name, reason, info.without);
  }
}

void set_step_report_sink(StepReportSink sink) {
  std::lock_guard lock(g_mu);
  g_sink = std::move(sink);
}

}  // namespace agentbox
