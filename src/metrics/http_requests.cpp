#include "metrics/http_requests.hpp"

#include <array>

namespace agentbox::metrics {

namespace {
// The methods an unmatched request is counted under; anything else is "other" (the method
// string is the client's, so it must not become a label as it came).
constexpr std::array<std::string_view, 8> kMethods = {"GET",    "HEAD",  "POST",    "PUT",
                                                      "DELETE", "PATCH", "OPTIONS", "other"};
}  // namespace

void HttpRequestMetrics::StatusCounts::add(unsigned code) {
  for (size_t i = 0; i < kSlots; ++i) {
    std::uint32_t held = status[i].load(std::memory_order_acquire);
    if (held == 0) {
      std::uint32_t expected = 0;
      if (status[i].compare_exchange_strong(expected, code, std::memory_order_acq_rel))
        held = code;
      else
        held = expected;
    }
    if (held == code) {
      count[i].fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  other.fetch_add(1, std::memory_order_relaxed);
}

void HttpRequestMetrics::name_routes(std::vector<RouteName> routes) {
  routes_.clear();
  for (RouteName& r : routes) routes_.emplace_back(std::move(r.method), std::move(r.pattern));
  route_count_ = routes_.size();
  for (std::string_view m : kMethods) routes_.emplace_back(std::string(m), "unmatched");
}

HttpRequestMetrics::Slot& HttpRequestMetrics::unmatched_slot(std::string_view method) {
  for (size_t i = 0; i + 1 < kMethods.size(); ++i)
    if (kMethods[i] == method) return routes_[route_count_ + i];
  return routes_[route_count_ + kMethods.size() - 1];
}

void HttpRequestMetrics::observe(size_t route_index, std::string_view method, unsigned status, double seconds) {
  if (routes_.empty()) return;  // name_routes() not called: a server without metrics
  Slot& slot = route_index < route_count_ ? routes_[route_index] : unmatched_slot(method);
  slot.latency.observe(seconds);
  slot.statuses.add(status);
  if (status == 507) storage_refusals_.fetch_add(1, std::memory_order_relaxed);
}

void HttpRequestMetrics::write(Exposition& out) const {
  out.family("agentbox_http_requests_total", "counter", "HTTP requests answered, by route pattern, method and status.");
  std::string code;
  for (const Slot& s : routes_) {
    for (size_t i = 0; i < StatusCounts::kSlots; ++i) {
      const std::uint32_t st = s.statuses.status[i].load(std::memory_order_acquire);
      if (st == 0) break;
      code = std::to_string(st);
      out.sample("agentbox_http_requests_total",
                 static_cast<double>(s.statuses.count[i].load(std::memory_order_relaxed)),
                 {{"route", s.pattern}, {"method", s.method}, {"status", code}});
    }
    if (const auto n = s.statuses.other.load(std::memory_order_relaxed); n > 0)
      out.sample("agentbox_http_requests_total", static_cast<double>(n),
                 {{"route", s.pattern}, {"method", s.method}, {"status", "other"}});
  }
  out.family("agentbox_http_request_duration_seconds", "histogram",
             "Seconds from a request's head read to its answer's last byte, by route pattern and method.");
  for (const Slot& s : routes_) {
    if (s.latency.count() == 0) continue;  // a route never called adds no series
    s.latency.write(out, "agentbox_http_request_duration_seconds", {{"route", s.pattern}, {"method", s.method}});
  }
  out.family("agentbox_storage_refusals_total", "counter",
             "Requests refused with 507: an account's volume or quota was full.");
  out.sample("agentbox_storage_refusals_total", static_cast<double>(storage_refusals()));
}

}  // namespace agentbox::metrics
