#pragma once
// The [metrics] keys of the server config.
//
//   [metrics]
//   listen = "10.0.0.5:9464"   # GET /metrics (and /health/*) here without a key; "" = none
//                              # (the admin key's GET /metrics on the API is always there)
#include <toml++/toml.h>

#include <array>
#include <string>
#include <string_view>

namespace agentbox {

struct MetricsConfig {
  std::string listen;  // HOST:PORT, port 0 picks one; empty: no metrics listener
};

inline constexpr std::array<std::string_view, 1> kMetricsSections = {"metrics"};

// Stores one key the walker found under [metrics]; false for a key that is not one of ours.
// Throws Error saying what is wrong with the value.
bool apply_metrics_key(MetricsConfig& config, std::string_view key, const toml::node& value);

}  // namespace agentbox
