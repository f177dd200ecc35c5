#include "config/audit_config.hpp"

#include "config/toml_schema.hpp"
#include "util/error.hpp"

namespace agentbox {

namespace {

AuditConfig::Level audit_level(const toml::node& value) {
  const std::string text = toml_string(value);
  if (text == "NONE") return AuditConfig::Level::none;
  if (text == "METADATA") return AuditConfig::Level::metadata;
  if (text == "REQUEST") return AuditConfig::Level::request;
  throw Error("expected \"NONE\", \"METADATA\" or \"REQUEST\", not \"" + text + "\"");
}

bool toml_bool(const toml::node& value) {
  if (!value.is_boolean()) throw Error("expected true or false");
  return value.as_boolean()->get();
}

}  // namespace

bool apply_audit_key(AuditConfig& config, std::string_view key, const toml::node& value) {
  if (key == "audit.level")
    config.level = audit_level(value);
  else if (key == "audit.path") {
    config.path = toml_string(value);
    if (config.path.empty()) throw Error("must not be empty (leave it out for STATE/audit/audit.jsonl)");
  } else if (key == "audit.max_size")
    config.max_size = toml_size(value);
  else if (key == "audit.max_files")
    config.max_files = static_cast<unsigned>(toml_integer(value, 0, 1000));
  else if (key == "audit.keep_days")
    config.keep_days = static_cast<unsigned>(toml_integer(value, 0, 36500));
  else if (key == "audit.stdout")
    config.to_stdout = toml_bool(value);
  else
    return false;
  return true;
}

}  // namespace agentbox
