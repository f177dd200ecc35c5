#pragma once
// The standard process_* families (what Prometheus' client libraries export for their own
// process): CPU seconds, resident and virtual memory, open and maximum descriptors, threads and
// the start time, read from /proc/self at each scrape.
//
// Runs on: the scrape's thread.
#include "metrics/exposition.hpp"

namespace agentbox::metrics {

void write_process_stats(Exposition& out);

}  // namespace agentbox::metrics
