#pragma once
// Names the calling thread, so `ps -L`, `top -H`, perf and /proc/PID/task/*/comm say what each
// of the daemon's threads is (docs/ARCHITECTURE.md "Threads" lists them by these names). The
// kernel keeps 15 characters; longer names are cut.
#include <string_view>

namespace agentbox {

void name_this_thread(std::string_view name) noexcept;

}  // namespace agentbox
