#pragma once
// What each account may keep on disk (DESIGN §8), from the [accounts] table:
//   [accounts]   disk = "10G"  inodes = 1000000  trash_days = 7
//   [accounts.users."alice"]  disk = "50G"  inodes = 2000000    # by X-User-Id
// disk = "0" turns quotas off (homes are plain directories of the state filesystem).
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <toml++/toml.h>

namespace agentbox {

struct StorageConfig {
  struct Quota {
    uint64_t disk_bytes = 10ull << 30;  // the account's volume: home, trash, logs, spool
    uint64_t inodes = 1000000;          // files and directories in it
  };
  struct QuotaOverride {
    std::optional<uint64_t> disk_bytes, inodes;  // unset: the default's
  };
  Quota quota;
  std::map<std::string, QuotaOverride> users;  // by external user id
  uint32_t trash_days = 7;                     // deleted entries are kept this long

  bool quotas() const { return quota.disk_bytes != 0; }
  // The quota of the account with this external id.
  Quota quota_for(std::string_view user) const;
};

// The smallest disk an account may get: an ext4 image needs room for its journal and tables.
inline constexpr uint64_t kMinDiskBytes = 16ull << 20;

// Sections StorageConfig needs the config walker to descend into.
inline constexpr std::array<std::string_view, 1> kStorageSections = {"accounts.users"};

// Applies one dotted key of [accounts] that is about storage; false for any other key.
bool apply_storage_key(StorageConfig& config, std::string_view key, const toml::node& value);

}  // namespace agentbox
