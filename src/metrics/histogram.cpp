#include "metrics/histogram.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace agentbox::metrics {

Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds), buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds.size() + 1)) {}

void Histogram::observe(double value) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

std::uint64_t Histogram::count() const {
  std::uint64_t n = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) n += buckets_[i].load(std::memory_order_relaxed);
  return n;
}

void Histogram::write(Exposition& out, std::string_view name, const std::vector<Label>& labels) const {
  const std::string bucket = std::string(name) + "_bucket";
  std::vector<Label> with_le = labels;
  with_le.push_back({"le", {}});
  std::uint64_t cumulative = 0;
  std::string le;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    le = i < bounds_.size() ? fmt::format("{}", bounds_[i]) : "+Inf";
    with_le.back().value = le;
    out.sample(bucket, static_cast<double>(cumulative), with_le);
  }
  // _count is the +Inf bucket, read once, so the two always agree within one page.
  out.sample(std::string(name) + "_sum", sum_.load(std::memory_order_relaxed), labels);
  out.sample(std::string(name) + "_count", static_cast<double>(cumulative), labels);
}

}  // namespace agentbox::metrics
