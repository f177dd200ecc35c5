#include "config/metrics_config.hpp"

#include "config/server_config.hpp"
#include "config/toml_schema.hpp"

namespace agentbox {

bool apply_metrics_key(MetricsConfig& config, std::string_view key, const toml::node& value) {
  if (key != "metrics.listen") return false;
  std::string text = toml_string(value);
  if (!text.empty()) parse_listen_address(text);  // throws naming the value
  config.listen = std::move(text);
  return true;
}

}  // namespace agentbox
