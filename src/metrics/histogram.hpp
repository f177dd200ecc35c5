#pragma once
// A Prometheus histogram of fixed buckets: one relaxed atomic add per observation, no lock, so
// it can sit on the request path. Buckets are counted apart and summed up when written.
//
// Runs on: any thread (observe); the scrape's thread (write).
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "metrics/exposition.hpp"

namespace agentbox::metrics {

// Upper bounds in seconds, for request latencies (1 ms .. 30 s) and box starts (10 ms .. 60 s).
inline constexpr double kRequestSeconds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  5,     10,   30};
inline constexpr double kStartSeconds[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

class Histogram {
 public:
  explicit Histogram(std::span<const double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void observe(double value);
  std::uint64_t count() const;
  // The _bucket, _sum and _count samples of `name` with `labels` (le added to the buckets).
  void write(Exposition& out, std::string_view name, const std::vector<Label>& labels) const;

 private:
  std::span<const double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // bounds_.size() + 1: the last is +Inf
  std::atomic<double> sum_{0};
};

}  // namespace agentbox::metrics
