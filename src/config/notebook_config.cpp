#include "config/notebook_config.hpp"

#include "config/toml_schema.hpp"
#include "util/error.hpp"

namespace agentbox {

namespace {
std::chrono::seconds positive_seconds(const toml::node& value) {
  auto s = toml_seconds(value);
  if (s.count() < 1) throw Error("must be at least 1 second");
  return s;
}
}  // namespace

bool apply_notebook_key(NotebookConfig& config, std::string_view key, const toml::node& value) {
  if (key == "notebooks.per_account")
    config.per_account = static_cast<size_t>(toml_integer(value, 1, 1024));
  else if (key == "notebooks.idle_timeout")
    config.idle_timeout = positive_seconds(value);
  else if (key == "notebooks.cell_timeout")
    config.cell_timeout = positive_seconds(value);
  else if (key == "files.preview_timeout")
    config.preview_timeout = positive_seconds(value);
  else
    return false;
  return true;
}

}  // namespace agentbox
