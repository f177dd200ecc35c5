#pragma once
// agentbox_http_requests_total{route,method,status} and agentbox_http_request_duration_seconds
// {route,method}: every answered request, counted once by the HTTP layer's observer (where the
// access log is written). route is the router's pattern ("/files/list", "/execute/{id}/status"),
// never the path, so neither a user id nor a file name reaches a label and the series stay as
// many as the routes; a request no route matched counts under route="unmatched".
//
// Runs on: the io threads (observe, lock-free: relaxed atomics in slots made before serving);
// the scrape's thread (write); name_routes() once, before the first request.
#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/exposition.hpp"
#include "metrics/histogram.hpp"

namespace agentbox::metrics {

struct RouteName {
  std::string method;   // "GET"
  std::string pattern;  // "/files/list"
};

class HttpRequestMetrics {
 public:
  static constexpr size_t kUnmatched = std::numeric_limits<size_t>::max();

  // The router's table, in its order: observe()'s route_index is a position in it.
  void name_routes(std::vector<RouteName> routes);
  // route_index: the matched route's position, or kUnmatched.
  void observe(size_t route_index, std::string_view method, unsigned status, double seconds);
  void write(Exposition& out) const;
  // The pattern of the route at route_index ("unmatched" for kUnmatched or before name_routes()).
  std::string_view pattern(size_t route_index) const {
    return route_index < route_count_ ? std::string_view(routes_[route_index].pattern) : "unmatched";
  }

  // Answers 507 (a volume or quota full): agentbox_storage_refusals_total.
  std::uint64_t storage_refusals() const { return storage_refusals_.load(std::memory_order_relaxed); }

 private:
  // The statuses one route has answered, each claimed once by a compare-and-swap.
  struct StatusCounts {
    static constexpr size_t kSlots = 16;
    std::atomic<std::uint32_t> status[kSlots]{};
    std::atomic<std::uint64_t> count[kSlots]{};
    std::atomic<std::uint64_t> other{0};  // a 17th distinct status and beyond
    void add(unsigned code);
  };
  struct Slot {
    Slot(std::string m, std::string p) : method(std::move(m)), pattern(std::move(p)), latency(kRequestSeconds) {}
    std::string method;
    std::string pattern;
    Histogram latency;
    StatusCounts statuses;
  };
  Slot& unmatched_slot(std::string_view method);

  std::deque<Slot> routes_;  // the router's, then one "unmatched" per method (kMethods)
  size_t route_count_ = 0;   // routes_[route_count_ ...] are the unmatched ones
  std::atomic<std::uint64_t> storage_refusals_{0};
};

}  // namespace agentbox::metrics
