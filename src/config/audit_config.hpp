#pragma once
// The [audit] keys of the server config: the OCSF audit trail (audit/trail.hpp).
//
//   [audit]
//   level = "METADATA"     # NONE (default: no trail), METADATA (no bodies), REQUEST (request
//                          # bodies cut at 4 KiB and headers, secrets redacted)
//   path = "/var/log/agentbox/audit.jsonl"  # default STATE/audit/audit.jsonl; relative: to the file
//   max_size = "100M"      # rotate to PATH.1 ... beyond this; 0 = never
//   max_files = 5          # rotated files kept
//   keep_days = 30         # rotated files older than this are removed; 0 = kept
//   stdout = true          # each line on stdout too, for a log shipper
#include <toml++/toml.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace agentbox {

struct AuditConfig {
  enum class Level : std::uint8_t { none, metadata, request } level = Level::none;
  std::string path;                       // "" = STATE/audit/audit.jsonl
  std::uint64_t max_size = 100ull << 20;  // bytes; 0 = never rotated
  unsigned max_files = 5;
  unsigned keep_days = 0;
  bool to_stdout = false;
};

inline constexpr std::array<std::string_view, 1> kAuditSections = {"audit"};

// Stores one key the walker found under [audit]; false for a key that is not one of ours.
// Throws Error saying what is wrong with the value.
bool apply_audit_key(AuditConfig& config, std::string_view key, const toml::node& value);

}  // namespace agentbox
