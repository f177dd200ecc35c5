#pragma once
// GET /metrics: the page Prometheus scrapes, built from what the daemon already keeps (the boxes,
// terminals, accounts, pools and the mirror, read at scrape time) and the counters of
// metrics/events.hpp and metrics/http_requests.hpp. docs/OPERATIONS.md lists every family.
//
// Runs on: the API's io thread (or the metrics listener's), once per scrape.
#include <functional>
#include <string>

#include "backup/mirror_service.hpp"
#include "box/box_manager.hpp"
#include "exec/terminals.hpp"
#include "http/counters.hpp"
#include "metrics/http_requests.hpp"
#include "store/account_store.hpp"
#include "util/fair_pool.hpp"

namespace agentbox::daemon {

struct MetricsSources {
  std::string version;
  const metrics::HttpRequestMetrics* http = nullptr;
  std::function<const http::HttpCounters*()> http_counters;  // the API server's, once it exists
  BoxManager* boxes = nullptr;
  exec::Terminals* terminals = nullptr;
  AccountStore* accounts = nullptr;
  const FairPool* file_pool = nullptr;
  backup::MirrorService* mirror = nullptr;  // null without [backup] dir
  std::string state_dir;                    // its filesystem's size and free space
};

std::string metrics_page(const MetricsSources& sources);

}  // namespace agentbox::daemon
